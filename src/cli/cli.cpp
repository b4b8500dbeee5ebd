#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <sstream>

#include "command.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cli {
namespace {

// Error output is always one short line: control characters escaped, long echoes cut.
std::string one_line(const std::string& text) {
  std::string line = echo_input(text, 1000);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

constexpr int kBadInput = 2;
constexpr int kInternalFailure = 1;
// The runtime failed: a rank timed out, failed or aborted (not the user's input).
constexpr int kRuntimeFailure = 3;

// Under mpirun every process runs the command; only the first prints errors, so that a bad
// argument gives one line, not one per rank.
bool prints_errors() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0') return std::string(value) == "0";
  }
  return true;
}

// The word the user typed where `app` wanted one of its subcommands, if it is none of them.
std::optional<std::string> unknown_subcommand(const CLI::App& app, const std::string& word) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return std::nullopt;
  }
  return word;
}

std::string subcommand_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err_stream) {
  std::ostringstream discarded;
  std::ostream& err = prints_errors() ? err_stream : discarded;
  CLI::App app("shardwise: sharded, multi-dimensional parallel training for C++", "shardwise");
  app.require_subcommand(1);
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(add_layout_command(app));
  commands.push_back(add_specs_command(app));
  commands.push_back(add_schedule_command(app));
  commands.push_back(add_bench_command(app));
  commands.push_back(add_train_command(app));
  commands.push_back(add_plan_command(app));

  // CLI11 reports an unknown command (or an option where a command belongs) as a missing one;
  // name the word instead.
  const bool asks_help = !args.empty() && (args.front() == "--help" || args.front() == "-h" ||
                                           args.front() == "--help-all");
  if (!args.empty() && !asks_help && unknown_subcommand(app, args.front())) {
    err << "shardwise: "
        << (args.front().rfind('-', 0) == 0 ? "unknown option '" : "unknown command '")
        << one_line(args.front()) << "'; expected a command: " << subcommand_names(app) << '\n';
    return kBadInput;
  }
  for (const auto& command : commands) {
    const CLI::App& chosen = command->app();
    if (args.empty() || chosen.get_name() != args.front() || chosen.get_subcommands({}).empty()) {
      continue;
    }
    if (args.size() < 2) {
      err << "shardwise " << chosen.get_name()
          << ": expected a command: " << subcommand_names(chosen) << '\n';
      return kBadInput;
    }
    const std::string& word = args[1];
    if (word != "--help" && word != "-h" && unknown_subcommand(chosen, word)) {
      err << "shardwise " << chosen.get_name() << ": unknown command '" << one_line(word)
          << "'; expected one of: " << subcommand_names(chosen) << '\n';
      return kBadInput;
    }
  }

  // CLI11 consumes arguments from the back.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "shardwise: " << one_line(e.what()) << "; run 'shardwise --help' for usage\n";
    return kBadInput;
  }

  for (const auto& command : commands) {
    if (!command->app().parsed()) continue;
    // Output is buffered, unless the command streams, so that a failure leaves stdout empty.
    std::ostringstream buffer;
    try {
      command->run(command->streams() ? out : buffer);
    } catch (const CommError& e) {
      err << "shardwise " << command->app().get_name() << ": " << one_line(e.what()) << '\n';
      return kRuntimeFailure;
    } catch (const Error& e) {
      err << "shardwise " << command->app().get_name() << ": " << one_line(e.what()) << '\n';
      return kBadInput;
    } catch (const std::exception& e) {
      err << "shardwise " << command->app().get_name() << ": internal error: " << one_line(e.what())
          << '\n';
      return kInternalFailure;
    }
    if (!command->streams()) out << buffer.str();
    out.flush();
    if (!out) {
      err << "shardwise " << command->app().get_name() << ": writing the output failed"
          << (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()) << '\n';
      return kInternalFailure;
    }
    return 0;
  }
  err << "shardwise: no command given; run 'shardwise --help' for usage\n";
  return kBadInput;
}

}  // namespace shardwise::cli

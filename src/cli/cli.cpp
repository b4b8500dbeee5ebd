#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <sstream>

#include "command.hpp"
#include "shardwise/core/error.hpp"
#ifdef SHARDWISE_HAVE_MPI
#include "shardwise/comm/mpi.hpp"
#endif

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
#ifdef SHARDWISE_HAVE_MPI
// How long a process of an MPI job waits for every other to report how it ended.
constexpr std::chrono::milliseconds kFinishTimeout{120'000};
#endif

// How a command ended: its exit status, and for a failure the line to print (one line, no
// newline) and whether the runtime failed because another rank did.
struct Outcome {
  int status = 0;
  std::string where;  // "shardwise train"
  std::string message;
};

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

// Parses and runs the command, writing its output to `out`; errors come back, not printed.
Outcome execute(const std::vector<std::string>& args, std::ostream& out) {
  CLI::App app("shardwise: sharded, multi-dimensional parallel training for C++", "shardwise");
  app.require_subcommand(1);
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(add_layout_command(app));
  commands.push_back(add_specs_command(app));
  commands.push_back(add_schedule_command(app));
  commands.push_back(add_bench_command(app));
  commands.push_back(add_train_command(app));
  commands.push_back(add_plan_command(app));
  commands.push_back(add_ckpt_command(app));
  commands.push_back(add_generate_command(app));
  commands.push_back(add_data_command(app));

  // CLI11 reports an unknown command (or an option where a command belongs) as a missing one;
  // name the word instead.
  const bool asks_help = !args.empty() && (args.front() == "--help" || args.front() == "-h" ||
                                           args.front() == "--help-all");
  if (!args.empty() && !asks_help && unknown_subcommand(app, args.front())) {
    return {kBadInput, "shardwise",
            (args.front().rfind('-', 0) == 0 ? "unknown option '" : "unknown command '") +
                one_line(args.front()) + "'; expected a command: " + subcommand_names(app)};
  }
  for (const auto& command : commands) {
    const CLI::App& chosen = command->app();
    if (args.empty() || chosen.get_name() != args.front() || chosen.get_subcommands({}).empty()) {
      continue;
    }
    const std::string where = "shardwise " + chosen.get_name();
    if (args.size() < 2) {
      return {kBadInput, where, "expected a command: " + subcommand_names(chosen)};
    }
    const std::string& word = args[1];
    if (word != "--help" && word != "-h" && unknown_subcommand(chosen, word)) {
      return {
          kBadInput, where,
          "unknown command '" + one_line(word) + "'; expected one of: " + subcommand_names(chosen)};
    }
  }

  // CLI11 consumes arguments from the back.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return {};
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return {};
  } catch (const CLI::ParseError& e) {
    return {kBadInput, "shardwise", one_line(e.what()) + "; run 'shardwise --help' for usage"};
  }

  for (const auto& command : commands) {
    if (!command->app().parsed()) continue;
    const std::string where = "shardwise " + command->app().get_name();
    // Output is buffered, unless the command streams, so that a failure leaves stdout empty.
    std::ostringstream buffer;
    try {
      command->run(command->streams() ? out : buffer);
    } catch (const CommError& e) {
      return {kRuntimeFailure, where, one_line(e.what())};
    } catch (const Error& e) {
      return {kBadInput, where, one_line(e.what())};
    } catch (const std::exception& e) {
      return {kInternalFailure, where, "internal error: " + one_line(e.what())};
    }
    if (!command->streams()) out << buffer.str();
    out.flush();
    if (!out) {
      return {kInternalFailure, where,
              "writing the output failed" +
                  (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string())};
    }
    return {};
  }
  return {kBadInput, "shardwise", "no command given; run 'shardwise --help' for usage"};
}

#ifdef SHARDWISE_HAVE_MPI
// Under mpirun every process runs the command, so a failure on any rank must reach the user and
// end every rank: a process that fails tells the others (their operations fail at once), and
// all of them end together, the lowest rank that failed on its own printing one line that names
// it, each exiting with that rank's status after MPI is finalised (no MPI_Abort banner).
int run_as_mpi_process(const std::vector<std::string>& args, std::ostream& out) {
  (void)mpi_session();  // every process joins the job first, whatever its arguments
  const Outcome outcome = execute(args, out);
  out.flush();
  return end_mpi_job({outcome.status, outcome.where, outcome.message}, kFinishTimeout);
}
#endif

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
#ifdef SHARDWISE_HAVE_MPI
  if (launched_by_mpirun()) return run_as_mpi_process(args, out);
#endif
  const Outcome outcome = execute(args, out);
  if (outcome.status != 0) err << outcome.where << ": " << outcome.message << '\n';
  return outcome.status;
}

}  // namespace shardwise::cli

#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <ostream>
#include <sstream>

#include "command.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cli {
namespace {

// Error output is always one line.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

constexpr int kBadInput = 2;
constexpr int kInternalFailure = 1;

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app("shardwise: sharded, multi-dimensional parallel training for C++", "shardwise");
  app.require_subcommand(1);
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(add_layout_command(app));
  commands.push_back(add_specs_command(app));
  commands.push_back(add_schedule_command(app));
  commands.push_back(add_bench_command(app));

  // CLI11 reports an unknown command as a missing one; name it instead.
  if (!args.empty() && !args.front().empty() && args.front().front() != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const auto& command) {
        return command->app().get_name() == args.front();
      })) {
    std::string known;
    for (const auto& command : commands) {
      known += (known.empty() ? "" : ", ") + command->app().get_name();
    }
    err << "shardwise: unknown command '" << one_line(args.front())
        << "'; expected one of: " << known << '\n';
    return kBadInput;
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
    // Output is buffered so that a failure leaves stdout empty.
    std::ostringstream buffer;
    try {
      command->run(buffer);
    } catch (const Error& e) {
      err << "shardwise " << command->app().get_name() << ": " << one_line(e.what()) << '\n';
      return kBadInput;
    } catch (const std::exception& e) {
      err << "shardwise " << command->app().get_name() << ": internal error: " << one_line(e.what())
          << '\n';
      return kInternalFailure;
    }
    out << buffer.str();
    return 0;
  }
  err << "shardwise: no command given; run 'shardwise --help' for usage\n";
  return kBadInput;
}

}  // namespace shardwise::cli

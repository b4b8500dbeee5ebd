#pragma once
// A subcommand of `shardwise`: it registers its options on the parser, then runs with them.

#include <iosfwd>
#include <memory>

namespace CLI {
class App;
}

namespace shardwise::cli {

class Command {
 public:
  virtual ~Command() = default;
  // The parser this command registered; parsed() on it tells whether the user chose it.
  [[nodiscard]] virtual const CLI::App& app() const = 0;
  // Writes the result to `out`; throws shardwise::Error for bad input.
  virtual void run(std::ostream& out) const = 0;
  // Whether it writes as it goes (a training run's progress) rather than all at the end. A
  // command that does not is buffered, so that a failure leaves its output empty; one that does
  // must find bad input before it writes anything.
  [[nodiscard]] virtual bool streams() const { return false; }
};

std::unique_ptr<Command> add_bench_command(CLI::App& parent);
std::unique_ptr<Command> add_ckpt_command(CLI::App& parent);
std::unique_ptr<Command> add_data_command(CLI::App& parent);
std::unique_ptr<Command> add_generate_command(CLI::App& parent);
std::unique_ptr<Command> add_layout_command(CLI::App& parent);
std::unique_ptr<Command> add_schedule_command(CLI::App& parent);
std::unique_ptr<Command> add_specs_command(CLI::App& parent);
std::unique_ptr<Command> add_train_command(CLI::App& parent);
std::unique_ptr<Command> add_plan_command(CLI::App& parent);

}  // namespace shardwise::cli

#pragma once
// A handle to an operation in flight (c10d's Work): the caller computes while it runs, then
// tests or waits for it. Buffers passed to the operation must stay alive and untouched (inputs)
// or unread (outputs) until it has finished.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace shardwise {

namespace detail {
class WorkState;
struct WorkAccess;
}  // namespace detail

class Work {
 public:
  // An operation that has already finished, successfully.
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state);

  // Drives progress (the MPI backend progresses only inside MPI calls) and returns true once
  // the operation has finished, successfully or not. Never throws for the operation's failure.
  bool test();

  // Blocks until the operation has finished and throws its failure as a CommError (the message
  // names the operation, the group and the member that failed). With a timeout, a CommError
  // also when it is still in flight after that long; it then stays in flight.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // Whether it has finished (without driving progress), and its failure once it has.
  [[nodiscard]] bool finished() const;
  [[nodiscard]] std::optional<std::string> error() const;

 private:
  friend struct detail::WorkAccess;
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace shardwise

#include "shardwise/train/rank_runner.hpp"

#include <mutex>
#include <optional>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::train {

void run_on_ranks(const BackendInfo& backend, int ranks,
                  const std::function<void(Communicator&)>& body) {
  std::mutex mutex;
  // The first rank's input error, with its rank where several threads could have said it.
  std::optional<std::string> input_error;
  try {
    backend.run(nullptr, nullptr, ranks, [&](Communicator& comm) {
      try {
        body(comm);
      } catch (const CommError&) {
        throw;
      } catch (const Error& e) {
        const std::lock_guard lock(mutex);
        if (!input_error) {
          input_error =
              (ranks > 1 && !backend.rank_per_process ? "rank " + std::to_string(comm.rank()) + ": "
                                                      : std::string()) +
              e.what();
        }
        throw;
      }
    });
  } catch (const Error&) {
    // A rank's input error (the others then fail in the runtime), or every rank failing alike
    // (a checkpoint they all found wrong): the rank's message.
    if (input_error) throw InvalidArgument(*input_error);
    throw;
  }
}

}  // namespace shardwise::train

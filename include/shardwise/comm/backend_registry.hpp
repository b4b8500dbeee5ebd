#pragma once
// The backends an SPMD program can run on, listed in one place. The local backend (threads of
// this process) is built in; a library that brings another registers it (shardwise::mpi:
// register_mpi_backend()). Choosing a backend (backend_choice.hpp), run_spmd and the CLI look
// backends up here by name and by their properties, so a third backend (TCP, NCCL) registers
// itself and touches nothing else.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/comm/communicator.hpp"

namespace shardwise {

struct BackendInfo {
  std::string name;  // "local", "mpi": what --backend and SHARDWISE_BACKEND take
  // Whether every rank is a process of its own, started by a launcher that fixes how many
  // there are; otherwise ranks are threads of this process, as many as asked for.
  bool rank_per_process = false;
  // Whether this process was started by this backend's launcher (mpirun for mpi): then the
  // backend is the default.
  std::function<bool()> launched;
  // Runs fn on every rank of a world: `local_ranks` threads, or the launcher's processes.
  // Throws a rank's failure (threads); a process whose rank fails ends the whole job, since
  // its peers would otherwise wait for it.
  std::function<void(int* argc, char*** argv, int local_ranks,
                     const std::function<void(Communicator&)>& fn)>
      run;
};

// Adds a backend. Registering a name again keeps the first; returns whether it was added. A
// backend without a name or a run function is an InvalidArgument.
bool register_backend(BackendInfo backend);

// The backend called `name`, or nullptr.
[[nodiscard]] const BackendInfo* find_backend(std::string_view name);

// Every registered backend's name, in registration order ("local" first).
[[nodiscard]] std::vector<std::string> backend_names();

// The registered backends, in registration order.
[[nodiscard]] std::vector<const BackendInfo*> registered_backends();

}  // namespace shardwise

#pragma once
// The MPI backend: one rank per process under mpirun (OpenMPI). Axis groups become MPI
// communicators of their members (created once, in group order); every collective is MPI's own,
// after the members have exchanged signatures of the call (so that a mismatched call is an
// error, not a hang). Operations progress inside MPI calls: Work::test and wait, and every later
// call on the same communicator.
// Link shardwise::mpi to use it; the rest of shardwise never needs MPI.

#include <functional>
#include <memory>
#include <string>

#include "shardwise/comm/backend_choice.hpp"
#include "shardwise/comm/communicator.hpp"

namespace shardwise {

// Initialises MPI for its lifetime (thread support: funneled) and owns the world communicator.
// One per process.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  MpiSession(MpiSession&&) = delete;
  MpiSession& operator=(MpiSession&&) = delete;

  [[nodiscard]] Communicator& world();
  // Ends every process of the job (after a rank failed), with this exit status.
  [[noreturn]] void abort(int status);

 private:
  std::unique_ptr<Communicator> world_;
};

// Registers the MPI backend ("mpi": a rank per process, the default under mpirun) in the
// backend registry; calling it again does nothing. Its run function starts MPI once per
// process (finalised at exit) and ends the whole job when the rank fails.
void register_mpi_backend();

// Runs fn on every rank of the backend choose_backend picks (`--backend NAME`, else
// SHARDWISE_BACKEND, else mpi under mpirun), with the MPI backend registered: on mpi one rank
// per process, on local `local_ranks` threads of this process. A rank whose fn throws ends the
// whole job with its message, as run_local does. Returns the process exit status.
int run_spmd(int* argc, char*** argv, int local_ranks,
             const std::function<void(Communicator&)>& fn);

}  // namespace shardwise

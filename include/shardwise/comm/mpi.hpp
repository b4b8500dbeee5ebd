#pragma once
// The MPI backend: one rank per process under mpirun (OpenMPI). Axis groups become MPI
// communicators of their members (created once, in group order); every collective is MPI's own.
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

// For benchmarks: the seconds per call of MPI's own collective ("all_reduce" and "all_gather"
// in place, "reduce_scatter", "all_to_all", "all_to_all_in_place", "broadcast") on MPI_COMM_WORLD
// with f32 buffers of `bytes` (nccl-tests sizes: the whole output of a gather, the whole input of a
// reduce-scatter), over `iterations` calls after one warm-up call. Collective over the world.
double raw_mpi_seconds(const std::string& op, std::size_t bytes, int iterations);

// Runs fn on every rank of the backend choose_backend picks (`--backend local|mpi`, else
// SHARDWISE_BACKEND, else mpi under mpirun): on mpi one rank per process, on local
// `local_ranks` threads of this process. A rank whose fn throws ends the
// whole job with its message, as run_local does. Returns the process exit status.
int run_spmd(int* argc, char*** argv, int local_ranks,
             const std::function<void(Communicator&)>& fn);

}  // namespace shardwise

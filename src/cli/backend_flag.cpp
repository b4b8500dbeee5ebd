#include "backend_flag.hpp"

#include "shardwise/comm/backend_choice.hpp"
#include "shardwise/core/error.hpp"
#ifdef SHARDWISE_HAVE_MPI
#include "shardwise/comm/mpi.hpp"
#endif

namespace shardwise::cli {

const BackendInfo& backend_from(const std::optional<std::string>& flag) {
#ifdef SHARDWISE_HAVE_MPI
  register_mpi_backend();
#endif
  const BackendInfo& backend =
      flag ? parse_backend(*flag, "--backend") : choose_backend(nullptr, nullptr);
#ifdef SHARDWISE_HAVE_MPI
  // Each process of the job would run a job of its own, training alone what the others train
  // together.
  if (launched_by_mpirun() && !backend.rank_per_process && mpi_session().world().size() > 1) {
    throw InvalidArgument("--backend " + backend.name +
                          " runs the ranks as threads of one "
                          "process, and mpirun started " +
                          std::to_string(mpi_session().world().size()) +
                          " processes that would each run a job of their own; leave out "
                          "--backend (mpi under mpirun) or run without mpirun");
  }
#endif
  return backend;
}

}  // namespace shardwise::cli

#pragma once
// Which backend an SPMD program runs on: a `--backend` flag, else the SHARDWISE_BACKEND
// environment variable, else the registered backend whose launcher started this process (mpi
// under mpirun), else local (threads). Backends are looked up in backend_registry.hpp.

#include <string_view>

#include "shardwise/comm/backend_registry.hpp"

namespace shardwise {

// A registered backend's name; anything else is an InvalidArgument naming `field`, the value
// and the registered names.
[[nodiscard]] const BackendInfo& parse_backend(std::string_view text, std::string_view field);

// True when this process was started by mpirun (OpenMPI's or a PMI launcher's environment).
[[nodiscard]] bool launched_by_mpirun();

// How many processes of this job the launcher started on this machine (OpenMPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS); 1 where no launcher says. Memory checks
// share the machine among them.
[[nodiscard]] int processes_on_this_node();

// `--backend=NAME` or `--backend NAME` in argv (removed from argv, as MPI_Init removes its own
// arguments), else SHARDWISE_BACKEND, else the first registered backend whose launcher started
// this process, else local.
[[nodiscard]] const BackendInfo& choose_backend(int* argc, char*** argv);

}  // namespace shardwise

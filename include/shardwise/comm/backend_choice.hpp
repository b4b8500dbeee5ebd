#pragma once
// Which backend an SPMD program runs on: a `--backend` flag, else the SHARDWISE_BACKEND
// environment variable, else the environment: mpi under mpirun, local (threads) otherwise.

#include <string>
#include <string_view>

namespace shardwise {

enum class Backend { kLocal, kMpi };

[[nodiscard]] std::string to_string(Backend backend);

// "local" or "mpi"; anything else is an InvalidArgument naming `field` and the value.
[[nodiscard]] Backend parse_backend(std::string_view text, std::string_view field);

// True when this process was started by mpirun (OpenMPI's or a PMI launcher's environment).
[[nodiscard]] bool launched_by_mpirun();

// `--backend=NAME` or `--backend NAME` in argv (removed from argv, as MPI_Init removes its own
// arguments), else SHARDWISE_BACKEND, else mpi under mpirun and local otherwise.
[[nodiscard]] Backend choose_backend(int* argc, char*** argv);

}  // namespace shardwise

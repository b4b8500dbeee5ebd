#pragma once
// The backend a command runs on: `--backend` if given, else SHARDWISE_BACKEND, else mpi under
// mpirun and local otherwise (with the MPI backend registered where the build has it).

#include <string>

#include "shardwise/comm/backend_registry.hpp"

namespace shardwise::cli {

const BackendInfo& backend_from(const std::string& flag);

}  // namespace shardwise::cli

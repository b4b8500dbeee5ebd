#pragma once
// The backend a command runs on: `--backend` if given, else SHARDWISE_BACKEND, else mpi under
// mpirun and local otherwise (with the MPI backend registered where the build has it).

#include <optional>
#include <string>

#include "shardwise/comm/backend_registry.hpp"

namespace shardwise::cli {

// An empty --backend is a mistake, refused by name, never read as not given.
const BackendInfo& backend_from(const std::optional<std::string>& flag);

}  // namespace shardwise::cli

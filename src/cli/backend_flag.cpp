#include "backend_flag.hpp"

#include "shardwise/comm/backend_choice.hpp"
#ifdef SHARDWISE_HAVE_MPI
#include "shardwise/comm/mpi.hpp"
#endif

namespace shardwise::cli {

const BackendInfo& backend_from(const std::string& flag) {
#ifdef SHARDWISE_HAVE_MPI
  register_mpi_backend();
#endif
  return flag.empty() ? choose_backend(nullptr, nullptr) : parse_backend(flag, "--backend");
}

}  // namespace shardwise::cli

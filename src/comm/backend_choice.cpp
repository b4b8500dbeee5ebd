#include "shardwise/comm/backend_choice.hpp"

#include <cstdlib>
#include <cstring>
#include <optional>

#include "shardwise/core/error.hpp"

namespace shardwise {

std::string to_string(Backend backend) { return backend == Backend::kMpi ? "mpi" : "local"; }

Backend parse_backend(std::string_view text, std::string_view field) {
  if (text == "local") return Backend::kLocal;
  if (text == "mpi") return Backend::kMpi;
  std::string message(field);
  message.append(": '").append(text).append("' is not a backend (local or mpi)");
  throw InvalidArgument(message);
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

Backend choose_backend(int* argc, char*** argv) {
  std::optional<Backend> chosen;
  if (argc != nullptr && argv != nullptr) {
    constexpr std::string_view kFlag = "--backend";
    int kept = 1;
    for (int i = 1; i < *argc; ++i) {
      const std::string_view arg = (*argv)[i];
      if (arg == kFlag) {
        if (i + 1 >= *argc) throw InvalidArgument("--backend: needs a value (local or mpi)");
        chosen = parse_backend((*argv)[++i], kFlag);
      } else if (arg.size() > kFlag.size() && arg.substr(0, kFlag.size() + 1) == "--backend=") {
        chosen = parse_backend(arg.substr(kFlag.size() + 1), kFlag);
      } else {
        (*argv)[kept++] = (*argv)[i];
      }
    }
    if (kept < *argc) (*argv)[kept] = nullptr;
    *argc = kept;
  }
  if (chosen) return *chosen;
  if (const char* variable = std::getenv("SHARDWISE_BACKEND")) {
    return parse_backend(variable, "SHARDWISE_BACKEND");
  }
  return launched_by_mpirun() ? Backend::kMpi : Backend::kLocal;
}

}  // namespace shardwise

#include "shardwise/comm/backend_choice.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

// "local or mpi", "local, mpi or tcp".
std::string names_text() {
  const std::vector<std::string> names = backend_names();
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

}  // namespace

const BackendInfo& parse_backend(std::string_view text, std::string_view field) {
  if (const BackendInfo* backend = find_backend(text)) return *backend;
  std::string message(field);
  message.append(": '")
      .append(text)
      .append("' is not a backend (")
      .append(names_text())
      .append(")");
  throw InvalidArgument(message);
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

int processes_on_this_node() {
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* value = std::getenv(variable);
    if (value == nullptr) continue;
    char* end = nullptr;
    errno = 0;
    const long count = std::strtol(value, &end, 10);
    // A launcher's own variable; anything unreadable is treated as absent.
    if (errno == 0 && end != value && *end == '\0' && count >= 1 && count <= (1L << 20)) {
      return static_cast<int>(count);
    }
  }
  return 1;
}

const BackendInfo& choose_backend(int* argc, char*** argv) {
  const BackendInfo* chosen = nullptr;
  if (argc != nullptr && argv != nullptr) {
    constexpr std::string_view kFlag = "--backend";
    int kept = 1;
    for (int i = 1; i < *argc; ++i) {
      const std::string_view arg = (*argv)[i];
      if (arg == kFlag) {
        if (i + 1 >= *argc) {
          throw InvalidArgument("--backend: needs a value (" + names_text() + ")");
        }
        chosen = &parse_backend((*argv)[++i], kFlag);
      } else if (arg.size() > kFlag.size() && arg.substr(0, kFlag.size() + 1) == "--backend=") {
        chosen = &parse_backend(arg.substr(kFlag.size() + 1), kFlag);
      } else {
        (*argv)[kept++] = (*argv)[i];
      }
    }
    if (kept < *argc) (*argv)[kept] = nullptr;
    *argc = kept;
  }
  if (chosen != nullptr) return *chosen;
  if (const char* variable = std::getenv("SHARDWISE_BACKEND")) {
    return parse_backend(variable, "SHARDWISE_BACKEND");
  }
  for (const BackendInfo* backend : registered_backends()) {
    if (backend->launched()) return *backend;
  }
  return parse_backend("local", "the default backend");
}

}  // namespace shardwise

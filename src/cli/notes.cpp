#include "notes.hpp"

#include <cstdlib>
#include <iostream>
#include <string_view>

namespace shardwise::cli {
namespace {

// Whether this process is the launcher's rank 0, or was not started by a launcher.
bool first_process() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* rank = std::getenv(variable)) return std::string_view(rank) == "0";
  }
  return true;
}

}  // namespace

void show_notes(const std::string& command, const std::vector<std::string>& notes) {
  if (notes.empty() || !first_process()) return;
  for (const std::string& note : notes) {
    std::cerr << "shardwise " << command << ": note: " << note << "\n";
  }
  std::cerr.flush();
}

}  // namespace shardwise::cli

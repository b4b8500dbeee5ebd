#pragma once
// Every entry under a folder with its bytes (a symlink as its target, a folder as itself), so
// that a test can say a user's files survived byte for byte.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

namespace shardwise::testing {

inline std::map<std::string, std::string> tree_snapshot(const std::filesystem::path& root) {
  std::map<std::string, std::string> entries;
  if (!std::filesystem::exists(std::filesystem::symlink_status(root))) return entries;
  for (auto it = std::filesystem::recursive_directory_iterator(root);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    const std::string name = std::filesystem::relative(it->path(), root).string();
    const auto status = it->symlink_status();
    if (std::filesystem::is_symlink(status)) {
      entries[name] = "symlink to " + std::filesystem::read_symlink(it->path()).string();
    } else if (std::filesystem::is_directory(status)) {
      entries[name] = "folder";
    } else if (std::filesystem::is_regular_file(status)) {
      std::ifstream in(it->path(), std::ios::binary);
      entries[name] = std::string(std::istreambuf_iterator<char>(in), {});
    } else {
      entries[name] = "special";
    }
  }
  return entries;
}

}  // namespace shardwise::testing

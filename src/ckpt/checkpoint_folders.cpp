#include "shardwise/ckpt/checkpoint_folders.hpp"

#include <algorithm>
#include <cstdio>
#include <system_error>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::ckpt {

std::string step_folder_name(std::int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::vector<SavedStep> list_checkpoints(const std::filesystem::path& root) {
  std::vector<SavedStep> found;
  std::error_code error;
  if (!std::filesystem::is_directory(root, error)) return found;
  for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 6 || name.size() > 25 || name.compare(0, 5, "step-") != 0) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    if (!std::filesystem::exists(entry.path() / kIndexFileName, error)) continue;
    found.push_back({std::stoll(name.substr(5)), entry.path()});
  }
  std::sort(found.begin(), found.end(),
            [](const SavedStep& a, const SavedStep& b) { return a.step < b.step; });
  return found;
}

void keep_newest(const std::filesystem::path& root, std::size_t keep) {
  const std::vector<SavedStep> saved = list_checkpoints(root);
  std::error_code error;
  // What an earlier removal left when it was killed halfway.
  for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".step-") && name.ends_with(".removing")) {
      std::filesystem::remove_all(entry.path(), error);
    }
  }
  for (std::size_t i = 0; i + std::max<std::size_t>(keep, 1) < saved.size(); ++i) {
    // Renamed first, in one step, so that a removal killed halfway never leaves a folder that
    // looks like a checkpoint and lacks files.
    const std::filesystem::path doomed =
        root / ("." + saved[i].folder.filename().string() + ".removing");
    std::filesystem::rename(saved[i].folder, doomed, error);
    if (!error) std::filesystem::remove_all(doomed, error);
    if (error) {
      throw CheckpointError("--keep: cannot remove the old checkpoint '" +
                            echo_input(saved[i].folder.string(), 200) + "': " + error.message());
    }
  }
}

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::exists(path / kIndexFileName, error)) return path;
  if (!std::filesystem::is_directory(path, error)) {
    throw CheckpointError("--resume '" + echo_input(path.string(), 200) +
                          "' is not a checkpoint or a folder of them");
  }
  const std::vector<SavedStep> saved = list_checkpoints(path);
  if (saved.empty()) {
    throw CheckpointError("--resume '" + echo_input(path.string(), 200) +
                          "' holds no whole checkpoint (no step-N folder with an index)");
  }
  return saved.back().folder;
}

}  // namespace shardwise::ckpt

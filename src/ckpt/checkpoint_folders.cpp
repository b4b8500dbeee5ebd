#include "shardwise/ckpt/checkpoint_folders.hpp"

#include <algorithm>
#include <charconv>
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

namespace {

// The step of a folder named "step-" and 1 to 18 digits; -1 for any other name.
std::int64_t step_of(const std::string& name) {
  if (name.size() < 6 || name.size() > 23 || name.compare(0, 5, "step-") != 0) return -1;
  std::int64_t step = 0;
  const auto [end, error] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  return error == std::errc() && end == name.data() + name.size() ? step : -1;
}

}  // namespace

std::vector<SavedStep> list_checkpoints(const std::filesystem::path& root) {
  std::vector<SavedStep> found;
  std::error_code error;
  if (!std::filesystem::is_directory(root, error)) return found;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    const std::int64_t step = step_of(it->path().filename().string());
    if (step < 0 || !std::filesystem::exists(it->path() / kIndexFileName, error)) continue;
    found.push_back({step, it->path()});
  }
  std::sort(found.begin(), found.end(),
            [](const SavedStep& a, const SavedStep& b) { return a.step < b.step; });
  return found;
}

void remove_leftovers(const std::filesystem::path& root) {
  std::error_code error;
  std::vector<std::filesystem::path> leftovers;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    for (const char* tail : {".partial", ".old", ".removing"}) {
      const std::string suffix = tail;
      if (name.size() > suffix.size() + 1 && name[0] == '.' && name.ends_with(suffix) &&
          step_of(name.substr(1, name.size() - 1 - suffix.size())) >= 0) {
        leftovers.push_back(it->path());
      }
    }
  }
  for (const std::filesystem::path& path : leftovers) std::filesystem::remove_all(path, error);
}

void keep_newest(const std::filesystem::path& root, std::size_t keep, std::int64_t up_to) {
  std::vector<SavedStep> saved = list_checkpoints(root);
  std::erase_if(saved, [&](const SavedStep& s) { return s.step > up_to; });
  std::error_code error;
  for (std::size_t i = 0; i + std::max<std::size_t>(keep, 1) < saved.size(); ++i) {
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

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path,
                                         const std::string& flag) {
  std::error_code error;
  if (std::filesystem::exists(path / kIndexFileName, error)) return path;
  if (!std::filesystem::is_directory(path, error)) {
    throw CheckpointError(flag + " '" + echo_input(path.string(), 200) +
                          "' is not a checkpoint or a folder of them");
  }
  const std::vector<SavedStep> saved = list_checkpoints(path);
  if (saved.empty()) {
    throw CheckpointError(flag + " '" + echo_input(path.string(), 200) +
                          "' holds no whole checkpoint (no step-N folder with an index)");
  }
  return saved.back().folder;
}

}  // namespace shardwise::ckpt

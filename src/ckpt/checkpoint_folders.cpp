#include "shardwise/ckpt/checkpoint_folders.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <set>
#include <system_error>

#include "detail/file_io.hpp"
#include "index_file.hpp"
#include "shard_names.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::ckpt {

using shardwise::detail::path_kind;
using shardwise::detail::PathKind;

std::string step_folder_name(std::int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::int64_t step_of_folder_name(const std::string& name) {
  if (name.size() < 6 || name.size() > 23 || name.compare(0, 5, "step-") != 0) return -1;
  std::int64_t step = 0;
  const auto [end, error] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  return error == std::errc() && end == name.data() + name.size() ? step : -1;
}

namespace {

std::string quoted(const std::filesystem::path& path) {
  return "'" + echo_input(path.string(), 200) + "'";
}

// The names of a folder's entries; none where it cannot be listed.
std::vector<std::string> entries_of(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end;
       it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  return names;
}

// A file a save writes into a checkpoint's folder: its index, a rank's data file.
bool written_by_a_save(const std::string& name) {
  if (name == kIndexFileName) return true;
  constexpr std::string_view kHead = "rank-";
  constexpr std::string_view kTail = ".safetensors";
  if (name.size() <= kHead.size() + kTail.size() || !name.starts_with(kHead) ||
      !name.ends_with(kTail)) {
    return false;
  }
  const std::string_view digits(name.data() + kHead.size(),
                                name.size() - kHead.size() - kTail.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Removes the files a save writes from `folder` (unlink never follows a symlink), then the
// folder; a note naming what keeps it where something else is there.
std::optional<std::string> remove_files_and_folder(const std::filesystem::path& folder) {
  std::vector<std::string> others;
  for (const std::string& name : entries_of(folder)) {
    if (!written_by_a_save(name)) {
      others.push_back(name);
      continue;
    }
    const std::filesystem::path file = folder / name;
    if (path_kind(file) == PathKind::kFolder) {
      others.push_back(name);
    } else if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
      return "cannot remove " + shardwise::detail::system_error_text(file, errno);
    }
  }
  if (!others.empty()) {
    return quoted(folder) + " holds '" + echo_input(others.front(), 100) + "'" +
           (others.size() > 1 ? " and " + std::to_string(others.size() - 1) + " more" : "") +
           ", which no save writes; it is left as it is";
  }
  if (::rmdir(folder.c_str()) != 0 && errno != ENOENT) {
    return "cannot remove " + shardwise::detail::system_error_text(folder, errno);
  }
  return std::nullopt;
}

// ".NAME.<run id>.<role>" names of `run_id`'s saves (run_id empty: of any run).
bool is_work_folder_name(const std::string& name, const std::string& run_id) {
  for (const char* role : {".partial", ".old", ".removing"}) {
    const std::string tail = role;
    if (name.size() < 1 + 1 + 1 + 32 + tail.size() || name[0] != '.' || !name.ends_with(tail)) {
      continue;
    }
    const std::string id = name.substr(name.size() - tail.size() - 32, 32);
    if (name[name.size() - tail.size() - 33] != '.' || !is_run_id(id)) continue;
    if (run_id.empty() || id == run_id) return true;
  }
  return false;
}

}  // namespace

std::vector<SavedStep> list_checkpoints(const std::filesystem::path& root) {
  std::vector<SavedStep> found;
  if (path_kind(root) == PathKind::kAbsent) return found;
  for (const std::string& name : entries_of(root)) {
    const std::int64_t step = step_of_folder_name(name);
    if (step < 0 || path_kind(root / name) != PathKind::kFolder ||
        path_kind(root / name / kIndexFileName) != PathKind::kFile) {
      continue;
    }
    found.push_back({step, root / name});
  }
  std::sort(found.begin(), found.end(),
            [](const SavedStep& a, const SavedStep& b) { return a.step < b.step; });
  return found;
}

SavePlace inspect_save_place(const std::filesystem::path& folder, const std::string& run_id) {
  using Occupant = SavePlace::Occupant;
  const PathKind kind = path_kind(folder);
  if (kind == PathKind::kAbsent) return {Occupant::kNothing, {}};
  if (kind != PathKind::kFolder) return {Occupant::kOther, "is " + path_kind_words(kind)};
  if (path_kind(folder / kIndexFileName) == PathKind::kAbsent) {
    return {Occupant::kOther, "is a folder without an index.json: no checkpoint"};
  }
  CheckpointIndex index;
  try {
    index = detail::read_index_file(folder, "its index.json");
  } catch (const Error& e) {
    return {Occupant::kOther, "holds an index.json that is no shardwise checkpoint's (" +
                                  echo_input(e.what(), 200) + ")"};
  }
  if (index.run_id.empty()) {
    return {Occupant::kOther,
            "is a checkpoint of no recorded run (an import, or saved before runs were recorded)"};
  }
  if (index.run_id != run_id) {
    return {Occupant::kOther, "is another run's checkpoint (run " + index.run_id + ")"};
  }
  std::set<std::string> named{kIndexFileName};
  for (const ArrayRecord& array : index.arrays) {
    for (const ShardRecord& shard : array.shards) named.insert(shard.file);
  }
  for (const std::string& name : entries_of(folder)) {
    if (named.count(name) == 0 || path_kind(folder / name) != PathKind::kFile) {
      return {Occupant::kOther, "holds '" + echo_input(name, 100) +
                                    "', which its index does not name as a file of its own"};
    }
  }
  return {Occupant::kThisRunsCheckpoint, {}};
}

std::filesystem::path save_work_folder(const std::filesystem::path& folder,
                                       const std::string& run_id, const std::string& role) {
  const std::filesystem::path parent = folder.parent_path();
  return parent / ("." + folder.filename().string() + "." + run_id + "." + role);
}

std::optional<std::string> remove_checkpoint(const std::filesystem::path& folder,
                                             const std::string& run_id) {
  const SavePlace place = inspect_save_place(folder, run_id);
  if (place.occupant == SavePlace::Occupant::kNothing) return std::nullopt;
  if (place.occupant == SavePlace::Occupant::kOther) {
    return quoted(folder) + " " + place.why + "; it is left as it is";
  }
  const std::filesystem::path doomed = save_work_folder(folder, run_id, "removing");
  if (path_kind(doomed) != PathKind::kAbsent) {
    if (auto note = remove_save_work_folder(doomed)) return note;
  }
  if (::rename(folder.c_str(), doomed.c_str()) != 0) {
    return "cannot remove the old checkpoint " +
           shardwise::detail::system_error_text(folder, errno);
  }
  return remove_files_and_folder(doomed);
}

std::optional<std::string> remove_save_work_folder(const std::filesystem::path& folder) {
  const PathKind kind = path_kind(folder);
  if (kind == PathKind::kAbsent) return std::nullopt;
  if (kind != PathKind::kFolder) {
    return quoted(folder) + " is " + path_kind_words(kind) + "; it is left as it is";
  }
  return remove_files_and_folder(folder);
}

std::vector<std::string> keep_newest(const std::filesystem::path& root, std::size_t keep,
                                     std::int64_t up_to, const std::string& run_id) {
  std::vector<std::string> notes;
  std::vector<SavedStep> own;
  for (const SavedStep& saved : list_checkpoints(root)) {
    if (saved.step > up_to) continue;
    const SavePlace place = inspect_save_place(saved.folder, run_id);
    if (place.occupant == SavePlace::Occupant::kThisRunsCheckpoint) {
      own.push_back(saved);
    } else {
      notes.push_back("--keep leaves " + quoted(saved.folder) + ": it " + place.why);
    }
  }
  for (std::size_t i = 0; i + std::max<std::size_t>(keep, 1) < own.size(); ++i) {
    if (auto note = remove_checkpoint(own[i].folder, run_id)) notes.push_back("--keep: " + *note);
  }
  return notes;
}

std::vector<std::string> remove_leftovers(const std::filesystem::path& root,
                                          const std::string& run_id) {
  std::vector<std::string> notes;
  if (path_kind(root) != PathKind::kFolder) return notes;
  for (const std::string& name : entries_of(root)) {
    if (!is_work_folder_name(name, run_id)) continue;
    if (auto note = remove_save_work_folder(root / name)) notes.push_back(*note);
  }
  return notes;
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

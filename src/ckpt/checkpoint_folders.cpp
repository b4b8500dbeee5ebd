#include "shardwise/ckpt/checkpoint_folders.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
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

// A folder opened without following a symlink, closed on destruction: what is removed is
// listed and unlinked through it, so that a folder swapped for a symlink meanwhile leads
// nowhere outside.
class FolderHandle {
 public:
  explicit FolderHandle(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)),
        error_(fd_ < 0 ? errno : 0) {}
  ~FolderHandle() {
    if (fd_ >= 0) ::close(fd_);
  }
  FolderHandle(const FolderHandle&) = delete;
  FolderHandle& operator=(const FolderHandle&) = delete;
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] int error() const { return error_; }
  // The same folder as the one at `path` now (device and inode).
  [[nodiscard]] bool is_at(const std::filesystem::path& path) const {
    struct stat held {};
    struct stat there {};
    return fd_ >= 0 && ::fstat(fd_, &held) == 0 && ::lstat(path.c_str(), &there) == 0 &&
           held.st_dev == there.st_dev && held.st_ino == there.st_ino;
  }
  // Its entries' names; empty where it cannot be read.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> found;
    const int copy = ::dup(fd_);
    if (copy < 0) return found;
    DIR* dir = ::fdopendir(copy);
    if (dir == nullptr) {
      ::close(copy);
      return found;
    }
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") found.push_back(name);
    }
    ::closedir(dir);
    return found;
  }
  [[nodiscard]] bool is_regular_file(const std::string& name) const {
    struct stat info {};
    return ::fstatat(fd_, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(info.st_mode);
  }

 private:
  int fd_;
  int error_;
};

std::string not_opened_note(const std::filesystem::path& folder, int error) {
  if (error == ELOOP || error == ENOTDIR) {
    return quoted(folder) + " is not a folder (a symlink?); it is left as it is";
  }
  return "cannot open " + shardwise::detail::system_error_text(folder, error);
}

// Removes, through `handle` (the folder at `folder`), the files a save writes, then the folder:
// nothing at all where it holds anything else (a note says what).
std::optional<std::string> remove_files_and_folder(const FolderHandle& handle,
                                                   const std::filesystem::path& folder) {
  std::vector<std::string> ours;
  std::vector<std::string> others;
  for (const std::string& name : handle.names()) {
    (written_by_a_save(name) && handle.is_regular_file(name) ? ours : others).push_back(name);
  }
  if (!others.empty()) {
    return quoted(folder) + " holds '" + echo_input(others.front(), 100) + "'" +
           (others.size() > 1 ? " and " + std::to_string(others.size() - 1) + " more" : "") +
           ", which no save writes; it is left as it is";
  }
  for (const std::string& name : ours) {
    if (::unlinkat(handle.fd(), name.c_str(), 0) != 0 && errno != ENOENT) {
      return "cannot remove " + shardwise::detail::system_error_text(folder / name, errno);
    }
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
  // Held open before the rename and compared after it: what moved must be the folder that was
  // inspected, never a symlink or another folder put in its place meanwhile (moved back then).
  const FolderHandle handle(folder);
  if (handle.fd() < 0) return not_opened_note(folder, handle.error());
  if (::rename(folder.c_str(), doomed.c_str()) != 0) {
    return "cannot remove the old checkpoint " +
           shardwise::detail::system_error_text(folder, errno);
  }
  if (!handle.is_at(doomed)) {
    (void)::rename(doomed.c_str(), folder.c_str());
    return quoted(folder) + " changed while it was removed; it is left as it is";
  }
  return remove_files_and_folder(handle, doomed);
}

std::optional<std::string> remove_save_work_folder(const std::filesystem::path& folder) {
  const PathKind kind = path_kind(folder);
  if (kind == PathKind::kAbsent) return std::nullopt;
  if (kind != PathKind::kFolder) {
    return quoted(folder) + " is " + path_kind_words(kind) + "; it is left as it is";
  }
  const FolderHandle handle(folder);
  if (handle.fd() < 0) return not_opened_note(folder, handle.error());
  return remove_files_and_folder(handle, folder);
}

std::vector<std::string> keep_newest(const std::filesystem::path& root, std::size_t keep,
                                     std::int64_t up_to, const std::string& run_id,
                                     const std::vector<RunAncestor>& ancestors) {
  std::vector<std::string> notes;
  // Each of the line's checkpoints with the run whose id it carries.
  std::vector<std::pair<SavedStep, std::string>> line;
  for (const SavedStep& saved : list_checkpoints(root)) {
    if (saved.step > up_to) continue;
    SavePlace place = inspect_save_place(saved.folder, run_id);
    std::string owner = run_id;
    for (const RunAncestor& ancestor : ancestors) {
      if (place.occupant == SavePlace::Occupant::kThisRunsCheckpoint) break;
      if (saved.step > ancestor.step) continue;  // the ancestor's steps after this line left it
      place = inspect_save_place(saved.folder, ancestor.run_id);
      owner = ancestor.run_id;
    }
    if (place.occupant == SavePlace::Occupant::kThisRunsCheckpoint) {
      line.emplace_back(saved, owner);
    } else {
      place = inspect_save_place(saved.folder, run_id);
      notes.push_back("--keep leaves " + quoted(saved.folder) + ": it " + place.why);
    }
  }
  for (std::size_t i = 0; i + std::max<std::size_t>(keep, 1) < line.size(); ++i) {
    if (auto note = remove_checkpoint(line[i].first.folder, line[i].second)) {
      notes.push_back("--keep: " + *note);
    }
  }
  return notes;
}

std::vector<std::string> remove_leftovers(const std::filesystem::path& root,
                                          const std::string& run_id,
                                          const std::vector<RunAncestor>& ancestors) {
  std::vector<std::string> notes;
  if (path_kind(root) != PathKind::kFolder) return notes;
  for (const std::string& name : entries_of(root)) {
    bool ours = is_work_folder_name(name, run_id);
    for (const RunAncestor& ancestor : ancestors) {
      ours = ours || is_work_folder_name(name, ancestor.run_id);
    }
    if (!ours) continue;
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

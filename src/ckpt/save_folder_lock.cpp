#include "shardwise/ckpt/save_folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "detail/file_io.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"

namespace shardwise::ckpt {

SaveFolderLock::SaveFolderLock(std::filesystem::path root, std::string flag)
    : root_(std::move(root)) {
  using shardwise::detail::path_kind;
  using shardwise::detail::PathKind;
  const std::string named = flag + " '" + echo_input(root_.string(), 200) + "'";
  std::error_code error;
  if (path_kind(root_) == PathKind::kAbsent) {
    // The folders this makes, the deepest first, to remove again if they stay empty.
    for (std::filesystem::path at = std::filesystem::absolute(root_, error);
         !error && path_kind(at) == PathKind::kAbsent && at != at.parent_path();
         at = at.parent_path()) {
      made_.push_back(at);
    }
    std::filesystem::create_directories(root_, error);
    if (error) throw CheckpointError("cannot make the folder " + named + ": " + error.message());
  }
  const std::filesystem::path file = root_ / kFileName;
  // The file another holder unlinks as it lets go may be the one this open found: taken only
  // where, once locked, the name still leads to the locked file.
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Made here (and removed when released), or one that was there: kept as it is.
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    made_file_ = fd >= 0;
    if (fd < 0 && errno == EEXIST) {
      fd = ::open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    }
    if (fd < 0) {
      const int cause = errno;
      throw CheckpointError(named + ": cannot open its lock " +
                            shardwise::detail::system_error_text(file, cause) +
                            (cause == ELOOP ? " (a symlink; it is left as it is)" : ""));
    }
    struct stat held {};
    if (::fstat(fd, &held) != 0 || !S_ISREG(held.st_mode)) {
      ::close(fd);
      throw CheckpointError(named + ": its lock '" + echo_input(file.string(), 200) +
                            "' is not a regular file; it is left as it is");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int cause = errno;
      ::close(fd);
      if (cause == EWOULDBLOCK) {
        throw CheckpointError(named + " is in use: another run is saving into it (it holds '" +
                              echo_input(file.string(), 200) +
                              "'); give each run a folder of its own");
      }
      throw CheckpointError(named + ": cannot lock " +
                            shardwise::detail::system_error_text(file, cause));
    }
    struct stat named_now {};
    if (::lstat(file.c_str(), &named_now) == 0 && named_now.st_ino == held.st_ino &&
        named_now.st_dev == held.st_dev) {
      fd_ = fd;
      return;
    }
    ::close(fd);  // the holder removed it meanwhile: try the new one
  }
  throw CheckpointError(named + ": its lock file kept changing; another run is starting there");
}

SaveFolderLock::~SaveFolderLock() {
  if (fd_ < 0) return;
  // Unlinked while held: a process that opened the old file finds it gone and tries again.
  if (made_file_) (void)::unlink((root_ / kFileName).c_str());
  ::close(fd_);
  for (const std::filesystem::path& folder : made_) {
    if (::rmdir(folder.c_str()) != 0) break;  // only where it is empty
  }
}

}  // namespace shardwise::ckpt

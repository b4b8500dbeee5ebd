#include "shardwise/ckpt/save_folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>
#include <system_error>

#include "detail/file_io.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"

namespace shardwise::ckpt {

namespace {

// A new lock file at `file`, locked (its descriptor), or -1 with errno EEXIST where the name is
// taken; CheckpointError where the folder cannot hold a file.
int make_locked(const std::filesystem::path& file, const std::string& named) {
  std::filesystem::path own = file;
  own += "." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  const int fd = ::open(own.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw CheckpointError(named + ": cannot make its lock " +
                          shardwise::detail::system_error_text(own, errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // nobody else can know its name: cannot happen
    const int cause = errno;
    ::close(fd);
    (void)::unlink(own.c_str());
    throw CheckpointError(named + ": cannot lock " +
                          shardwise::detail::system_error_text(own, cause));
  }
  const int linked = ::link(own.c_str(), file.c_str());
  const int cause = errno;
  (void)::unlink(own.c_str());
  if (linked == 0) return fd;
  ::close(fd);
  if (cause != EEXIST) {
    throw CheckpointError(named + ": cannot make its lock " +
                          shardwise::detail::system_error_text(file, cause));
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

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
    // A lock this run makes appears under its name already locked: made under a name of its
    // own, locked, then linked into place (link fails where the name is taken). Made in place,
    // a second run could open and lock it before its maker did, and then neither would remove
    // it. Where the name is taken the file there is used and kept as it is.
    int fd = make_locked(file, named);
    made_file_ = fd >= 0;
    if (fd < 0) fd = ::open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT) continue;  // its holder removed it meanwhile
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

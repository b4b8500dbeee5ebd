#include "file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "shardwise/core/error.hpp"
#include "text_format.hpp"

namespace shardwise::detail {

std::string system_error_text(const std::filesystem::path& path, int error) {
  return "'" + echo_input(path.string(), 200) + "': " + std::strerror(error);
}

File::File(const std::filesystem::path& path, int flags, int mode) : path_(path) {
  do {
    // Without O_NONBLOCK a FIFO in a file's place would block the open until a writer came;
    // with it, the open returns and size() refuses what is not a regular file.
    fd_ = ::open(path.c_str(),
                 flags | O_CLOEXEC | ((flags & O_ACCMODE) == O_RDONLY ? O_NONBLOCK : 0), mode);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    const int error = errno;
    // O_NOFOLLOW's refusal of a symlink reads as ELOOP: say what it means.
    if (error == ELOOP && (flags & O_NOFOLLOW) != 0) {
      throw FileError("'" + echo_input(path.string(), 200) +
                      "' is a symlink; shardwise opens no file through one here");
    }
    throw FileError("cannot open " + system_error_text(path, error));
  }
}

File File::adopt(int fd, std::filesystem::path path) {
  File file;
  file.fd_ = fd;
  file.path_ = std::move(path);
  return file;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

std::uint64_t File::size() const {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) throw FileError("cannot stat " + system_error_text(path_, errno));
  if (!S_ISREG(info.st_mode)) {
    throw FileError("'" + echo_input(path_.string(), 200) + "' is not a regular file");
  }
  return static_cast<std::uint64_t>(info.st_size);
}

void File::write_all(const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most 0x7ffff000 bytes a call.
    const ssize_t wrote = ::write(fd_, p, std::min<std::size_t>(size, std::size_t{1} << 30));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      throw FileError("cannot write " + system_error_text(path_, wrote < 0 ? errno : ENOSPC));
    }
    p += wrote;
    size -= static_cast<std::size_t>(wrote);
  }
}

void File::read_at(void* data, std::size_t size, std::uint64_t offset) const {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::pread(fd_, p, std::min<std::size_t>(size, std::size_t{1} << 30),
                                static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw FileError("cannot read " + system_error_text(path_, errno));
    if (got == 0) {
      throw FileError("'" + echo_input(path_.string(), 200) + "' ends at byte " +
                      std::to_string(offset) + ", before the " + std::to_string(size) +
                      " bytes the index places there (a truncated file?)");
    }
    p += got;
    size -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

void File::sync() {
  if (::fsync(fd_) != 0) throw FileError("cannot fsync " + system_error_text(path_, errno));
}

void File::close() {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) {
    throw FileError("cannot close " + system_error_text(path_, errno));
  }
}

void sync_directory(const std::filesystem::path& path) {
  File folder(path, O_RDONLY | O_DIRECTORY);
  folder.sync();
}

PathKind path_kind(const std::filesystem::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return PathKind::kAbsent;
    throw FileError("cannot look at " + system_error_text(path, errno));
  }
  if (S_ISREG(info.st_mode)) return PathKind::kFile;
  if (S_ISDIR(info.st_mode)) return PathKind::kFolder;
  if (S_ISLNK(info.st_mode)) return PathKind::kSymlink;
  return PathKind::kOther;
}

std::string path_kind_words(PathKind kind) {
  switch (kind) {
    case PathKind::kAbsent: return "nothing";
    case PathKind::kFile: return "a file";
    case PathKind::kFolder: return "a folder";
    case PathKind::kSymlink: return "a symlink";
    case PathKind::kOther: return "a FIFO, device or socket";
  }
  return "something else";
}

std::string random_hex(std::size_t bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::random_device device;  // getrandom(2) on Linux
  std::string text;
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto byte = static_cast<unsigned>(device() & 0xffU);
    text += kDigits[byte >> 4];
    text += kDigits[byte & 0xfU];
  }
  return text;
}

std::string read_file(const std::string& path, const std::string& option) {
  const std::string quoted = option + " '" + echo_input(path) + "'";
  // Opened first and checked on the descriptor (never blocking on a FIFO put in its place),
  // then read to its end: a file such as /proc/self/status says it has 0 bytes and has more.
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw InvalidArgument("cannot read " + quoted + ": " + std::strerror(errno));
  const File file = File::adopt(fd, path);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    throw InvalidArgument("cannot read " + quoted + ": " + std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) throw InvalidArgument(quoted + " is a directory, not a file");
  if (!S_ISREG(info.st_mode)) {
    throw InvalidArgument(quoted + " is not a regular file (a device, pipe or socket)");
  }
  const auto too_large = [&](std::int64_t bytes) {
    return InvalidArgument(quoted + " has " + (bytes > kMaxInputFileBytes ? "" : "more than ") +
                           with_thousands(bytes) + " bytes; input files are read up to " +
                           with_thousands(kMaxInputFileBytes));
  };
  if (info.st_size > kMaxInputFileBytes) throw too_large(info.st_size);
  std::string content;
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  while (true) {
    const std::size_t old_size = content.size();
    content.resize(old_size + kBlock);
    const ssize_t got = ::read(fd, content.data() + old_size, kBlock);
    if (got < 0 && errno == EINTR) {
      content.resize(old_size);
      continue;
    }
    if (got < 0) throw InvalidArgument("cannot read " + quoted + ": " + std::strerror(errno));
    content.resize(old_size + static_cast<std::size_t>(got));
    if (got == 0) break;
    if (content.size() > static_cast<std::size_t>(kMaxInputFileBytes)) {
      throw too_large(kMaxInputFileBytes);
    }
  }
  return content;
}

}  // namespace shardwise::detail

#pragma once
// POSIX file steps shared by the layers that write and read files (checkpoints, exports, logs,
// timelines), each throwing FileError naming the path and errno's words.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace shardwise::detail {

// A file descriptor closed on destruction.
class File {
 public:
  File() = default;
  // open(2) with `flags` (O_CLOEXEC added; O_NONBLOCK added for reading, so that a FIFO in a
  // file's place cannot block the open).
  File(const std::filesystem::path& path, int flags, int mode = 0644);
  // Owns `fd`, already open on `path`.
  static File adopt(int fd, std::filesystem::path path);
  ~File();
  File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  // The size of a regular file (anything else is a FileError).
  [[nodiscard]] std::uint64_t size() const;
  void write_all(const void* data, std::size_t size);
  // Reads exactly `size` bytes at `offset` (a file shorter than that is an error).
  void read_at(void* data, std::size_t size, std::uint64_t offset) const;
  void sync();
  // Closes, reporting what close finds (NFS reports write errors there).
  void close();

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

void sync_directory(const std::filesystem::path& path);

// The largest input file a command reads (manifests, rules and configs are kilobytes; a
// Llama-70B manifest is under 100 KB).
inline constexpr std::int64_t kMaxInputFileBytes = std::int64_t{64} << 20;

// The contents of a regular file of at most kMaxInputFileBytes; InvalidArgument naming the
// option otherwise (missing, a directory, a device or pipe such as /dev/zero, too large).
std::string read_file(const std::string& path, const std::string& option);

// "'path': No space left on device"
[[nodiscard]] std::string system_error_text(const std::filesystem::path& path, int error);

// What lstat(2) finds at a path, without following a symlink there.
enum class PathKind { kAbsent, kFile, kFolder, kSymlink, kOther };
[[nodiscard]] PathKind path_kind(const std::filesystem::path& path);
// "a symlink", "a folder", "a FIFO, device or socket", ... for messages.
[[nodiscard]] std::string path_kind_words(PathKind kind);

// A hex string of `bytes` random bytes (the kernel's randomness), for names no one else uses.
[[nodiscard]] std::string random_hex(std::size_t bytes);

}  // namespace shardwise::detail

#pragma once
// POSIX file steps of a checkpoint, each throwing CheckpointError naming the path and errno's
// words.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace shardwise::ckpt::detail {

// A file descriptor closed on destruction.
class File {
 public:
  File() = default;
  File(const std::filesystem::path& path, int flags, int mode = 0644);
  ~File();
  File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
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

// "'path': No space left on device"
[[nodiscard]] std::string system_error_text(const std::filesystem::path& path, int error);

}  // namespace shardwise::ckpt::detail

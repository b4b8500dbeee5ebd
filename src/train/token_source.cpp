#include "shardwise/train/token_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "detail/splitmix.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

std::size_t element_size(TokenFormat format) {
  switch (format) {
    case TokenFormat::kText: return 1;
    case TokenFormat::kTokensU16: return 2;
    case TokenFormat::kTokensU32: return 4;
  }
  return 1;
}

class BytesSource final : public TokenSource {
 public:
  BytesSource(std::string bytes, std::string name)
      : bytes_(std::move(bytes)), name_(std::move(name)) {}
  [[nodiscard]] std::size_t size() const override { return bytes_.size(); }
  void read(std::size_t first, std::size_t count, std::int32_t* out) const override {
    for (std::size_t i = 0; i < count; ++i) {
      out[i] = static_cast<unsigned char>(bytes_[first + i]);
    }
  }
  [[nodiscard]] std::uint64_t fingerprint() const override { return detail::fnv1a(bytes_); }
  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] std::size_t byte_of(std::size_t token) const override { return token; }

 private:
  std::string bytes_;
  std::string name_;
};

class FileSource final : public TokenSource {
 public:
  FileSource(const std::string& path, TokenFormat format, const std::string& flag)
      : format_(format), element_(element_size(format)), name_(flag + " '" + path + "'") {
    // Checked before it is opened: opening a pipe would wait for a writer.
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
      throw InvalidArgument("cannot read " + name_ + ": " + std::strerror(errno));
    }
    if (!S_ISREG(info.st_mode)) {
      throw InvalidArgument(name_ + " is not a regular file (a directory, device, pipe or socket)");
    }
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw InvalidArgument("cannot read " + name_ + ": " + std::strerror(errno));
    bytes_ = static_cast<std::size_t>(info.st_size);
    if (bytes_ % element_ != 0) {
      ::close(fd_);
      throw InvalidArgument(name_ + " has " + std::to_string(bytes_) +
                            " bytes, not a whole number of " + std::to_string(element_) +
                            "-byte token ids (" + to_string(format) + ")");
    }
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  [[nodiscard]] std::size_t size() const override { return bytes_ / element_; }

  void read(std::size_t first, std::size_t count, std::int32_t* out) const override {
    std::vector<unsigned char> raw(count * element_);
    read_bytes(first * element_, raw.data(), raw.size());
    for (std::size_t i = 0; i < count; ++i) {
      const unsigned char* id = raw.data() + i * element_;
      std::uint32_t value = 0;
      for (std::size_t b = element_; b-- > 0;) value = (value << 8) | id[b];  // little-endian
      out[i] = static_cast<std::int32_t>(value & 0x7fffffffU);
      if (value > 0x7fffffffU) out[i] = -1;  // out of any vocabulary; named by the caller
    }
  }

  [[nodiscard]] std::uint64_t fingerprint() const override {
    constexpr std::size_t kBlocks = 64;
    constexpr std::size_t kBlock = 4096;
    std::uint64_t hash = detail::splitmix64(bytes_ ^ (static_cast<std::uint64_t>(format_) << 56));
    std::vector<unsigned char> block(kBlock);
    for (std::size_t b = 0; b < kBlocks; ++b) {
      const std::size_t at = bytes_ <= kBlock ? 0 : (bytes_ - kBlock) / (kBlocks - 1) * b;
      const std::size_t length = std::min(kBlock, bytes_);
      read_bytes(at, block.data(), length);
      hash = detail::splitmix64(hash ^ detail::fnv1a(std::string_view(
                                           reinterpret_cast<const char*>(block.data()), length)));
      if (bytes_ <= kBlock) break;
    }
    return hash;
  }

  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] std::size_t byte_of(std::size_t token) const override { return token * element_; }

 private:
  void read_bytes(std::size_t offset, unsigned char* out, std::size_t length) const {
    std::size_t done = 0;
    while (done < length) {
      const ssize_t got =
          ::pread(fd_, out + done, length - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw InvalidArgument(name_ + ": cannot read bytes " + std::to_string(offset) + " to " +
                              std::to_string(offset + length) +
                              (got == 0 ? " (the file is shorter than when it was opened: it "
                                          "changed while the run read it)"
                                        : std::string(": ") + std::strerror(errno)));
      }
      done += static_cast<std::size_t>(got);
    }
  }

  TokenFormat format_;
  std::size_t element_;
  std::string name_;
  int fd_ = -1;
  std::size_t bytes_ = 0;
};

}  // namespace

TokenFormat parse_token_format(std::string_view text, std::string_view flag) {
  if (text == "text") return TokenFormat::kText;
  if (text == "tokens-u16") return TokenFormat::kTokensU16;
  if (text == "tokens-u32") return TokenFormat::kTokensU32;
  throw InvalidArgument(std::string(flag) + " is '" + echo_input(text) +
                        "'; expected text, tokens-u16 or tokens-u32");
}

std::string to_string(TokenFormat format) {
  switch (format) {
    case TokenFormat::kText: return "text";
    case TokenFormat::kTokensU16: return "tokens-u16";
    case TokenFormat::kTokensU32: return "tokens-u32";
  }
  return "text";
}

std::shared_ptr<const TokenSource> bytes_source(std::string bytes, std::string name) {
  return std::make_shared<BytesSource>(std::move(bytes), std::move(name));
}

std::shared_ptr<const TokenSource> file_source(const std::string& path, TokenFormat format,
                                               const std::string& flag) {
  return std::make_shared<FileSource>(path, format, flag);
}

}  // namespace shardwise::train

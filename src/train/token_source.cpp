#include "shardwise/train/token_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "../detail/file_io.hpp"
#include "detail/splitmix.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/text_stream.hpp"

namespace shardwise::train {
namespace {

std::size_t element_size(TokenFormat format) {
  switch (format) {
    case TokenFormat::kText: return 1;
    case TokenFormat::kTokensU16: return 2;
    case TokenFormat::kTokensU32: return 4;
    case TokenFormat::kJsonLines: break;  // refused before a FileSource is made
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
  // Ids a tokenizer wrote into `fd` (an unnamed file of uint32 ids), owned from now on.
  FileSource(int fd, std::size_t bytes, std::string name)
      : format_(TokenFormat::kTokensU32),
        element_(4),
        name_(std::move(name)),
        fd_(fd),
        bytes_(bytes),
        encoded_(true) {}

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
  [[nodiscard]] std::size_t byte_of(std::size_t token) const override {
    return encoded_ ? kNoByte : token * element_;
  }

  // Blocks of the file read in turn, the holes of a sparse file (zeros: the id 0) skipped.
  [[nodiscard]] std::optional<std::size_t> first_outside(std::size_t vocab) const override {
    constexpr std::size_t kBlock = std::size_t{1} << 22;
    std::vector<std::int32_t> ids(kBlock / element_);
    std::size_t offset = 0;
    while (offset < bytes_) {
      const off_t data = ::lseek(fd_, static_cast<off_t>(offset), SEEK_DATA);
      if (data < 0 && errno == ENXIO) break;  // a hole to the end
      // A file system without SEEK_DATA (EINVAL) is read through, holes and all.
      if (data >= 0) {
        offset = std::max(offset, static_cast<std::size_t>(data) / element_ * element_);
      }
      const std::size_t length = std::min(kBlock, bytes_ - offset);
      const std::size_t first = offset / element_;
      read(first, length / element_, ids.data());
      std::int32_t largest = 0;
      for (std::size_t i = 0; i < length / element_; ++i) {
        largest = std::max(largest, ids[i] < 0 ? std::numeric_limits<std::int32_t>::max() : ids[i]);
      }
      if (static_cast<std::size_t>(largest) >= vocab) {
        for (std::size_t i = 0;; ++i) {
          if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= vocab) return first + i;
        }
      }
      offset += length;
    }
    return std::nullopt;
  }

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
  bool encoded_ = false;
};

}  // namespace

std::optional<std::size_t> TokenSource::first_outside(std::size_t vocab) const {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  std::vector<std::int32_t> ids(kBlock);
  for (std::size_t first = 0; first < size(); first += kBlock) {
    const std::size_t count = std::min(kBlock, size() - first);
    read(first, count, ids.data());
    for (std::size_t i = 0; i < count; ++i) {
      if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= vocab) return first + i;
    }
  }
  return std::nullopt;
}

TokenFormat parse_token_format(std::string_view text, std::string_view flag) {
  if (text == "text") return TokenFormat::kText;
  if (text == "tokens-u16") return TokenFormat::kTokensU16;
  if (text == "tokens-u32") return TokenFormat::kTokensU32;
  if (text == "jsonl") return TokenFormat::kJsonLines;
  throw InvalidArgument(std::string(flag) + " is '" + echo_input(text) +
                        "'; expected text, tokens-u16, tokens-u32 or jsonl");
}

std::string to_string(TokenFormat format) {
  switch (format) {
    case TokenFormat::kText: return "text";
    case TokenFormat::kTokensU16: return "tokens-u16";
    case TokenFormat::kTokensU32: return "tokens-u32";
    case TokenFormat::kJsonLines: return "jsonl";
  }
  return "text";
}

std::shared_ptr<const TokenSource> bytes_source(std::string bytes, std::string name) {
  return std::make_shared<BytesSource>(std::move(bytes), std::move(name));
}

std::shared_ptr<const TokenSource> file_source(const std::string& path, TokenFormat format,
                                               const std::string& flag) {
  if (format == TokenFormat::kJsonLines) {
    throw InvalidArgument(flag + " '" + echo_input(path, 200) +
                          "': JSON Lines hold examples (train/fine_tuning_data.hpp), not a stream "
                          "of tokens");
  }
  return std::make_shared<FileSource>(path, format, flag);
}

std::shared_ptr<const TokenSource> encoded_text_source(const std::string& path,
                                                       const text::Tokenizer& tokenizer,
                                                       const std::string& tokenizer_words,
                                                       const std::string& flag) {
  const std::string what = flag + " '" + echo_input(path, 200) + "'";
  // An unnamed file in the temporary folder: nothing to remove, whatever ends the run.
  const std::filesystem::path folder = std::filesystem::temp_directory_path();
  int fd = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // A file system without unnamed files: a named one, unlinked at once.
    std::string name = (folder / "shardwise-ids-XXXXXX").string();
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) {
    throw InvalidArgument("cannot make a temporary file in '" + folder.string() +
                          "' for the ids of " + what + ": " + std::strerror(errno));
  }
  shardwise::detail::File ids_file = shardwise::detail::File::adopt(fd, folder / "(ids)");
  std::vector<std::uint32_t> block;
  std::size_t bytes = 0;
  text::encode_file(tokenizer, path, what, text::StreamOptions{},
                    [&](std::span<const std::int32_t> ids) {
                      block.assign(ids.begin(), ids.end());  // little-endian, as the format
                      ids_file.write_all(block.data(), block.size() * sizeof(std::uint32_t));
                      bytes += block.size() * sizeof(std::uint32_t);
                      return true;
                    });
  const int owned = ::dup(ids_file.fd());
  if (owned < 0)
    throw InvalidArgument("cannot keep the ids of " + what + ": " + std::strerror(errno));
  return std::make_shared<FileSource>(owned, bytes,
                                      what + " (as " + tokenizer_words + " encodes it)");
}

}  // namespace shardwise::train

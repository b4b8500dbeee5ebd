#include "shardwise/models/prompt_codec.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "../detail/file_io.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/text_stream.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::models {
namespace {

std::string ids_text(std::span<const std::int32_t> ids) {
  std::string text;
  for (const std::int32_t id : ids) text += (text.empty() ? "" : " ") + std::to_string(id);
  return text;
}

// Up to `most` bytes of the regular file at `path`, read to its end or to `most` (a file such as
// /proc/self/status says it has 0 bytes and has more).
std::string read_prefix(const std::string& path, const std::string& field, std::size_t most) {
  const std::string what = field + " '" + echo_input(path, 200) + "'";
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw InvalidArgument("cannot read " + what + ": " + std::strerror(errno));
  const shardwise::detail::File file = shardwise::detail::File::adopt(fd, path);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw InvalidArgument(what + " is not a regular file (a folder, device, FIFO or socket)");
  }
  std::string bytes(most, '\0');
  std::size_t done = 0;
  while (done < most) {
    const ssize_t got = ::read(fd, bytes.data() + done, most - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InvalidArgument("cannot read " + what + ": " + std::strerror(errno));
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

// The tokenizer's error with the flag that gave the text in front.
std::vector<std::int32_t> encode_named(const text::Tokenizer& tokenizer, const std::string& text,
                                       const std::string& field) {
  try {
    return tokenizer.encode(text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(field + ": " + e.what());
  }
}

}  // namespace

std::filesystem::path tokenizer_file(const ModelSource& source,
                                     const std::optional<std::string>& given,
                                     const train::SettingNames& named) {
  // An empty tokenizer is a mistake, not "the folder's own": refused, never read as not given.
  if (given && given->empty()) {
    throw InvalidArgument(named("tokenizer") + " is empty; expected a tokenizer.json");
  }
  return given ? std::filesystem::path(*given) : source.tokenizer;
}

std::shared_ptr<const text::Tokenizer> model_tokenizer(const ModelSource& source,
                                                       const std::filesystem::path& file,
                                                       bool given,
                                                       const train::SettingNames& named) {
  std::shared_ptr<const text::Tokenizer> tokenizer;
  try {
    tokenizer = std::make_shared<const text::Tokenizer>(text::Tokenizer::from_file(file));
  } catch (const Error& e) {  // named as the caller gave it: the setting, or the model's folder
    throw InvalidArgument((given ? named("tokenizer") + ": " : source.words + ": ") + e.what());
  }
  const std::size_t vocab = source.model->vocab_size();
  if (tokenizer->vocab_size() > vocab) {
    throw InvalidArgument("tokenizer.json '" + echo_input(file.string(), 200) + "' has " +
                          std::to_string(tokenizer->vocab_size()) + " tokens; " + source.words +
                          " has a vocabulary of " + std::to_string(vocab));
  }
  return tokenizer;
}

std::vector<std::int32_t> encode_file_prefix(const text::Tokenizer& tokenizer,
                                             const std::string& path, const std::string& what,
                                             std::size_t most) {
  std::vector<std::int32_t> ids;
  text::encode_file(
      tokenizer, path, what, text::StreamOptions{}, [&](std::span<const std::int32_t> block) {
        const std::size_t taken = std::min(block.size(), most - ids.size());
        ids.insert(ids.end(), block.begin(), block.begin() + static_cast<std::ptrdiff_t>(taken));
        return ids.size() < most;
      });
  return ids;
}

PromptCodec prompt_codec(const ModelSource& source, const std::optional<std::string>& tokenizer,
                         const train::SettingNames& named) {
  const std::size_t vocab = source.model->vocab_size();
  const std::filesystem::path file = tokenizer_file(source, tokenizer, named);
  if (!file.empty()) {
    const std::shared_ptr<const text::Tokenizer> bpe =
        model_tokenizer(source, file, tokenizer.has_value(), named);
    return {"tokenizer.json '" + echo_input(file.string(), 200) + "'",
            [bpe](const std::string& text, const std::string& field) {
              return encode_named(*bpe, text, field);
            },
            [bpe](std::span<const std::int32_t> ids) {
              // Ids past the tokenizer's (a vocabulary padded for the model axis) are shown as
              // ids; the runs between them decode together, as their bytes join.
              std::string text;
              std::size_t start = 0;
              for (std::size_t i = 0; i <= ids.size(); ++i) {
                if (i < ids.size() && static_cast<std::size_t>(ids[i]) < bpe->vocab_size())
                  continue;
                text += bpe->decode(ids.subspan(start, i - start));
                if (i < ids.size()) text += "[" + std::to_string(ids[i]) + "]";
                start = i + 1;
              }
              return text;
            },
            [bpe](const std::string& path, const std::string& field, std::size_t most) {
              return encode_file_prefix(*bpe, path, field + " '" + echo_input(path, 200) + "'",
                                        most + 1);
            }};
  }
  if (vocab == 256) {
    return {"bytes",
            [](const std::string& text, const std::string&) {
              std::vector<std::int32_t> ids;
              for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
              return ids;
            },
            [](std::span<const std::int32_t> ids) {
              std::string text;
              for (const std::int32_t id : ids) text += static_cast<char>(id);
              return text;
            },
            [](const std::string& path, const std::string& field, std::size_t most) {
              std::vector<std::int32_t> ids;
              for (const char c : read_prefix(path, field, most + 1)) {
                ids.push_back(static_cast<unsigned char>(c));
              }
              return ids;
            }};
  }
  const std::string no_text = source.words + " has a vocabulary of " + std::to_string(vocab) +
                              " tokens and no tokenizer.json; give " + named("tokenizer") +
                              ", or the prompt as " + named("prompt_ids");
  return {"ids",
          [no_text](const std::string&, const std::string& field) -> std::vector<std::int32_t> {
            throw InvalidArgument(field + ": " + no_text);
          },
          [](std::span<const std::int32_t> ids) { return ids_text(ids); },
          [no_text](const std::string&, const std::string& field, std::size_t)
              -> std::vector<std::int32_t> { throw InvalidArgument(field + ": " + no_text); }};
}

std::vector<std::int32_t> end_tokens_of(const ModelSource& source,
                                        const train::SettingNames& named) {
  std::vector<std::int32_t> ids;
  for (const std::int64_t id : source.end_tokens) {
    if (id < 0 || id >= static_cast<std::int64_t>(source.model->vocab_size())) {
      throw InvalidArgument(source.words + ": " + source.end_tokens_from + "'s eos_token_id " +
                            std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(source.model->vocab_size()) + "; give " +
                            named("stop_tokens") + " (ids, or none)");
    }
    ids.push_back(static_cast<std::int32_t>(id));
  }
  return ids;
}

}  // namespace shardwise::models

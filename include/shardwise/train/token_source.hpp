#pragma once
// Where training tokens come from: bytes held in memory (the built-in corpus, a test's text), or
// a file of any size read where a batch needs it: a text file whose bytes are the tokens (a
// model of 256 tokens), a text file a tokenizer encoded, or a token file of uint16 or uint32 ids
// (nanoGPT's train.bin / val.bin layout, little-endian).
// Files are read with pread, never copied whole nor mapped: a file that shrinks while a run
// reads it is an error naming it, where a mapping would end the process with SIGBUS.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace shardwise::text {
class Tokenizer;
}

namespace shardwise::train {

// kJsonLines: fine-tuning examples (train/fine_tuning_data.hpp), which are no token stream.
enum class TokenFormat { kText, kTokensU16, kTokensU32, kJsonLines };

// "text", "tokens-u16", "tokens-u32" or "jsonl"; anything else is an InvalidArgument naming
// `flag`.
TokenFormat parse_token_format(std::string_view text, std::string_view flag);
std::string to_string(TokenFormat format);

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  [[nodiscard]] virtual std::size_t size() const = 0;
  // Tokens [first, first + count) into `out`; an InvalidArgument where they cannot be read.
  virtual void read(std::size_t first, std::size_t count, std::int32_t* out) const = 0;
  // The same for the same tokens in every process: a hash of the size, the format and (for a
  // file) 64 blocks of 4 KiB spread over it, so that a file of any size is fingerprinted at once.
  [[nodiscard]] virtual std::uint64_t fingerprint() const = 0;
  // "--data 'train.bin'", for messages.
  [[nodiscard]] virtual const std::string& name() const = 0;
  // Where token i lies in the source, for messages ("byte 24690"); kNoByte where no byte of the
  // source is the token's own (text a tokenizer encoded).
  [[nodiscard]] virtual std::size_t byte_of(std::size_t token) const = 0;
  static constexpr std::size_t kNoByte = static_cast<std::size_t>(-1);
  // The first token whose id is `vocab` or more (or above 2^31), or nullopt: read through once,
  // so that a bad id is found before training starts rather than when a batch draws it.
  [[nodiscard]] virtual std::optional<std::size_t> first_outside(std::size_t vocab) const;
};

// Bytes held in memory, each a token.
std::shared_ptr<const TokenSource> bytes_source(std::string bytes, std::string name);

// The file at `path` in `format`, opened now and read as batches need it. InvalidArgument naming
// `flag` and the path for a file that is missing, not regular, or (token files) not a whole
// number of ids.
std::shared_ptr<const TokenSource> file_source(const std::string& path, TokenFormat format,
                                               const std::string& flag);

// The text file at `path` as `tokenizer` encodes it whole (special tokens included), encoded once
// as it streams into a temporary file of ids that is gone with the source (text/text_stream.hpp:
// memory bounded, chunks on several threads). InvalidArgument naming `flag` and the path for a
// file that is missing, not regular, or not UTF-8.
std::shared_ptr<const TokenSource> encoded_text_source(const std::string& path,
                                                       const text::Tokenizer& tokenizer,
                                                       const std::string& tokenizer_words,
                                                       const std::string& flag);

}  // namespace shardwise::train

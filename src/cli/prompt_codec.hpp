#pragma once
// How `shardwise generate` turns a prompt's text into ids and ids back into text: the model's
// tokenizer.json (byte-level BPE), bytes for a model of 256 tokens, or ids alone.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "shardwise/models/model_source.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::cli {

struct PromptCodec {
  std::string words;  // "tokenizer.json 'gpt2/tokenizer.json'", "bytes", "ids"
  // InvalidArgument naming `field` where the text cannot be encoded.
  std::function<std::vector<std::int32_t>(const std::string& text, const std::string& field)>
      encode;
  std::function<std::string(std::span<const std::int32_t> ids)> decode;
  // The first `most` + 1 ids of a text file at most (a prompt of more than `most` is refused
  // by the caller whatever its length), read and encoded as it streams: never the whole of a
  // huge file. InvalidArgument naming `field` and the path.
  std::function<std::vector<std::int32_t>(const std::string& path, const std::string& field,
                                          std::size_t most)>
      encode_file;
};

// --tokenizer's file where given (an empty one refused), else the source's tokenizer.json; empty
// where there is neither.
[[nodiscard]] std::filesystem::path tokenizer_file(const models::ModelSource& source,
                                                   const std::optional<std::string>& flag);
// The tokenizer at `file` (from tokenizer_file), its errors named as the user gave it (--tokenizer,
// or the model's folder), refused where it has more tokens than the model's vocabulary.
[[nodiscard]] std::shared_ptr<const text::Tokenizer> model_tokenizer(
    const models::ModelSource& source, const std::filesystem::path& file, bool from_flag);
// The first `most` ids of the text file at `path` as `tokenizer` encodes it (special tokens
// included), read as it streams and no further than they need; `what` names the file.
[[nodiscard]] std::vector<std::int32_t> encode_file_prefix(const text::Tokenizer& tokenizer,
                                                           const std::string& path,
                                                           const std::string& what,
                                                           std::size_t most);

// --tokenizer's file where given, else the source's tokenizer.json, else bytes where the model
// has 256 tokens, else ids (text prompts refused, output written as ids).
[[nodiscard]] PromptCodec prompt_codec(const models::ModelSource& source,
                                       const std::optional<std::string>& tokenizer);

// "464,3290,318": ids of a vocabulary of `vocab` tokens; InvalidArgument naming `flag`.
[[nodiscard]] std::vector<std::int32_t> parse_token_ids(const std::string& text,
                                                        const std::string& flag, std::size_t vocab);
// --stop-ids: ids as above, or "none".
[[nodiscard]] std::vector<std::int32_t> parse_stop_ids(const std::string& text, std::size_t vocab);

}  // namespace shardwise::cli

#pragma once
// How a model's text becomes ids and ids text again, for generation and for a loss on a text
// file: the model's tokenizer.json (byte-level BPE), bytes for a model of 256 tokens, or ids
// alone. Messages name the settings as the caller does (SettingNames: "tokenizer", "prompt_ids").

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
#include "shardwise/train/setting_names.hpp"

namespace shardwise::models {

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

// The tokenizer file given (`given`, the setting "tokenizer"; an empty one refused), else the
// source's tokenizer.json; empty where there is neither.
[[nodiscard]] std::filesystem::path tokenizer_file(const ModelSource& source,
                                                   const std::optional<std::string>& given,
                                                   const train::SettingNames& named = {});
// The tokenizer at `file` (from tokenizer_file), its errors named as the caller gave it (the
// setting "tokenizer" where `given`, else the model's folder), refused where it has more tokens
// than the model's vocabulary.
[[nodiscard]] std::shared_ptr<const text::Tokenizer> model_tokenizer(
    const ModelSource& source, const std::filesystem::path& file, bool given,
    const train::SettingNames& named = {});
// The first `most` ids of the text file at `path` as `tokenizer` encodes it (special tokens
// included), read as it streams and no further than they need; `what` names the file.
[[nodiscard]] std::vector<std::int32_t> encode_file_prefix(const text::Tokenizer& tokenizer,
                                                           const std::string& path,
                                                           const std::string& what,
                                                           std::size_t most);

// The tokenizer given, else the source's tokenizer.json, else bytes where the model has 256
// tokens, else ids (text refused, naming the settings "tokenizer" and "prompt_ids"; output
// written as ids).
[[nodiscard]] PromptCodec prompt_codec(const ModelSource& source,
                                       const std::optional<std::string>& tokenizer,
                                       const train::SettingNames& named = {});

// The end-of-text ids the source names (ModelSource::end_tokens), each checked within the
// model's vocabulary: InvalidArgument naming the file and, as the remedy, the setting
// "stop_tokens".
[[nodiscard]] std::vector<std::int32_t> end_tokens_of(const ModelSource& source,
                                                      const train::SettingNames& named = {});

}  // namespace shardwise::models

#pragma once
// Reading the parts of a tokenizer.json, each refusing what the tokenizer does not compute
// with InvalidArgument (or ParseError for a value of the wrong type) naming the field and the
// value. The tokenizer's own reader (tokenizer_json.cpp) puts the parts together.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../detail/json_reader.hpp"
#include "added_vocabulary.hpp"
#include "bpe_model.hpp"
#include "decoder.hpp"
#include "normalizer.hpp"
#include "post_processor.hpp"
#include "pre_tokenizer.hpp"

namespace shardwise::text::detail {

using ::shardwise::detail::JsonObjectReader;

// A boolean the library requires, and one it also takes as null (its Option<bool>).
[[nodiscard]] bool required_boolean(JsonObjectReader& reader, const std::string& key);
[[nodiscard]] bool nullable_boolean(JsonObjectReader& reader, const std::string& key,
                                    bool fallback);
// A token in quotes for a message, control characters escaped, cut short.
[[nodiscard]] std::string quote_token(std::string_view token);
// The value echoed for a message: its JSON, cut short.
[[nodiscard]] std::string echo_json(const nlohmann::json& value);

// "model": a BPE model, its vocabulary's ids 0 to n - 1 each given once, every merge's tokens
// and their join in the vocabulary.
[[nodiscard]] BpeModel read_bpe_model(const nlohmann::json& model);

// "added_tokens": each token with the id the library gives it (the model's id of its content,
// else the next past the vocabulary), which the file must state, and the pattern it is found
// as (a normalized token's content through `normalizer`).
[[nodiscard]] std::vector<AddedToken> read_added_tokens(
    const nlohmann::json* list, const BpeModel& model,
    const std::vector<NormalizerStep>& normalizer);

// "normalizer" (a Sequence's steps flattened; normalizer_json.cpp).
void read_normalizer(const nlohmann::json& value, const std::string& field,
                     std::vector<NormalizerStep>& steps);
// "pre_tokenizer" (a Sequence's steps flattened), "post_processor".
void read_pre_tokenizer(const nlohmann::json& value, const std::string& field,
                        std::vector<PreTokenizerStep>& steps);
void read_post_processor(const nlohmann::json& value, const std::string& field,
                         std::size_t vocab_size, std::optional<Template>& post_template);
// "decoder" (a Sequence's steps flattened; decoder_json.cpp): nullopt for null, where the library
// joins the tokens with spaces.
[[nodiscard]] std::optional<std::vector<DecoderStep>> read_decoder(const nlohmann::json& value);

// A plain string pattern {"String": "..."} of a Replace, not empty (a {"Regex": ...} is refused).
[[nodiscard]] std::string read_string_pattern(JsonObjectReader& reader);
// A field holding one character (a Rust char): its UTF-8.
[[nodiscard]] std::string read_character(JsonObjectReader& reader, const std::string& key);
// A Metaspace pre-tokenizer's or decoder's prepend_scheme as the library reads it: "always"
// where absent, and add_prefix_space false means "never" (with another scheme the library
// refuses the file, and so does this).
[[nodiscard]] PrependScheme read_prepend_scheme(JsonObjectReader& reader);
// Metaspace's "str_rep", which the library reads and ignores: a string or null.
void read_unused_str_rep(JsonObjectReader& reader);

}  // namespace shardwise::text::detail

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
// else the next past the vocabulary), which the file must state.
[[nodiscard]] std::vector<AddedToken> read_added_tokens(const nlohmann::json* list,
                                                        const BpeModel& model);

// "pre_tokenizer" (a Sequence's steps flattened), "post_processor", "decoder" (true: ByteLevel).
void read_pre_tokenizer(const nlohmann::json& value, const std::string& field,
                        std::vector<PreTokenizerStep>& steps);
void read_post_processor(const nlohmann::json& value, const std::string& field,
                         std::size_t vocab_size, std::optional<Template>& post_template);
[[nodiscard]] bool read_decoder(const nlohmann::json& value);

}  // namespace shardwise::text::detail

// Reading tokenizer.json's "model": a BPE model's vocabulary, merges and settings.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "detail/string_hash.hpp"
#include "detail/tokenizer_json.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::text::detail {
namespace {

using ::shardwise::detail::json_integer;
using ::shardwise::detail::json_string;
using ::shardwise::detail::json_type_name;

// Each id's token: the ids must be 0 to n - 1, each given once (the library numbers added
// tokens from n, so a gap or a repeat would give two tokens one id).
std::vector<std::string> read_vocabulary(const nlohmann::json& vocab) {
  if (!vocab.is_object()) {
    throw ParseError("field 'model.vocab' must be an object of tokens and their ids, not " +
                     json_type_name(vocab));
  }
  const std::size_t size = vocab.size();
  std::vector<std::string> tokens(size);
  std::vector<bool> given(size, false);
  for (const auto& [token, value] : vocab.items()) {
    const std::int64_t id = json_integer(value, "model.vocab[" + quote_token(token) + "]");
    if (id < 0 || static_cast<std::uint64_t>(id) >= size) {
      throw InvalidArgument("model.vocab gives " + quote_token(token) + " the id " +
                            std::to_string(id) + ", outside 0 to " + std::to_string(size - 1) +
                            " (a vocabulary of " + std::to_string(size) +
                            " tokens has each of those ids once)");
    }
    const auto index = static_cast<std::size_t>(id);
    if (given[index]) {
      throw InvalidArgument("model.vocab gives the id " + std::to_string(id) + " to both " +
                            quote_token(tokens[index]) + " and " + quote_token(token));
    }
    given[index] = true;
    tokens[index] = token;
  }
  return tokens;
}

// The two tokens of merges[i]: "a b" (the form GPT-2's file keeps) or ["a", "b"].
std::pair<std::string, std::string> merge_tokens(const nlohmann::json& entry, bool pairs,
                                                 const std::string& field) {
  if (pairs) {
    if (!entry.is_array() || entry.size() != 2) {
      throw InvalidArgument("field '" + field + "' is " + echo_json(entry) +
                            ": merges[0] is a pair, so every merge must be a pair of tokens");
    }
    return {json_string(entry[0], field + "[0]"), json_string(entry[1], field + "[1]")};
  }
  if (!entry.is_string()) {
    throw InvalidArgument("field '" + field + "' is " + echo_json(entry) +
                          ": merges[0] is a string, so every merge must be a string \"a b\"");
  }
  const std::string text = entry.get<std::string>();
  const std::size_t space = text.find(' ');
  if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
    throw InvalidArgument("field '" + field + "' is " + echo_json(entry) +
                          ": a merge string is two tokens and one space between them");
  }
  return {text.substr(0, space), text.substr(space + 1)};
}

std::vector<Merge> read_merges(const nlohmann::json& merges, const StringMap<std::int32_t>& ids) {
  if (!merges.is_array()) {
    throw ParseError("field 'model.merges' must be a list, not " + json_type_name(merges));
  }
  const bool pairs = !merges.empty() && merges[0].is_array();
  const auto id_of = [&](const std::string& token, const std::string& field,
                         const char* role) -> std::int32_t {
    const auto it = ids.find(token);
    if (it == ids.end()) {
      throw InvalidArgument("field '" + field + "' " + role + " " + quote_token(token) +
                            ", which model.vocab lacks");
    }
    return it->second;
  };
  std::vector<Merge> out;
  out.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    // The library drops a "#version" line of a merges.txt copied in whole.
    if (!pairs && merges[i].is_string() && merges[i].get<std::string>().starts_with("#version")) {
      continue;
    }
    const auto [left, right] = merge_tokens(merges[i], pairs, field);
    out.push_back({id_of(left, field, "names"), id_of(right, field, "names"),
                   id_of(left + right, field, "makes")});
  }
  return out;
}

// A prefix or suffix the library adds to subwords: only none, which files write as null or as
// "" (transformers' converters and trainers given "" write that; it adds nothing). nlohmann's
// empty() is false for every string, so the string itself is asked.
void refuse_affix(JsonObjectReader& reader, const std::string& key) {
  const nlohmann::json* value = reader.optional(key);
  if (value == nullptr || value->is_null()) return;
  if (value->is_string() && value->get_ref<const std::string&>().empty()) return;
  throw InvalidArgument("field '" + reader.field(key) + "' is " + echo_json(*value) +
                        ": subword affixes are not computed (only null or \"\")");
}

}  // namespace

BpeModel read_bpe_model(const nlohmann::json& value) {
  JsonObjectReader reader(value, "model");
  if (const nlohmann::json* type = reader.optional("type"); type && *type != "BPE") {
    throw InvalidArgument("field 'model.type' is " + echo_json(*type) +
                          ": only BPE models are computed (byte-level and SentencePiece-style)");
  }
  if (const nlohmann::json* dropout = reader.optional("dropout"); dropout && !dropout->is_null()) {
    throw InvalidArgument("field 'model.dropout' is " + echo_json(*dropout) +
                          ": dropout skips merges at random; only null is computed");
  }
  refuse_affix(reader, "continuing_subword_prefix");
  refuse_affix(reader, "end_of_word_suffix");
  std::vector<std::string> tokens = read_vocabulary(reader.required("vocab"));
  StringMap<std::int32_t> ids;
  ids.reserve(tokens.size());
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    ids.emplace(tokens[id], static_cast<std::int32_t>(id));
  }
  BpeSettings settings;
  settings.ignore_merges = nullable_boolean(reader, "ignore_merges", false);
  settings.byte_fallback = nullable_boolean(reader, "byte_fallback", false);
  settings.fuse_unknown = nullable_boolean(reader, "fuse_unk", false);
  if (const nlohmann::json* unk = reader.optional("unk_token"); unk && !unk->is_null()) {
    const std::string token = json_string(*unk, "model.unk_token");
    const auto it = ids.find(token);
    if (it == ids.end()) {
      throw InvalidArgument("field 'model.unk_token' is " + quote_token(token) +
                            ", which model.vocab lacks");
    }
    settings.unknown_id = it->second;
  }
  const std::vector<Merge> merges = read_merges(reader.required("merges"), ids);
  reader.finish();
  return BpeModel(std::move(tokens), merges, settings);
}

}  // namespace shardwise::text::detail

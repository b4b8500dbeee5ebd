// Reading tokenizer.json's added tokens, pre-tokenizer and post-processor.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "detail/tokenizer_json.hpp"
#include "detail/unicode_classes.hpp"
#include "detail/utf8.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::text::detail {
namespace {

using ::shardwise::detail::json_integer;
using ::shardwise::detail::json_string;
using ::shardwise::detail::json_type_name;

const nlohmann::json& list_field(JsonObjectReader& reader, const std::string& key) {
  const nlohmann::json& list = reader.required(key);
  if (!list.is_array()) {
    throw ParseError("field '" + reader.field(key) + "' must be a list, not " +
                     json_type_name(list));
  }
  return list;
}

std::string element(const std::string& field, std::size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

// The library splits a token with rstrip off together with the spaces after it and searches
// on from the token's end: a token starting with a space found there would overlap it.
void refuse_overlapping_strips(const std::vector<AddedToken>& tokens) {
  for (const AddedToken& stripped : tokens) {
    if (!stripped.rstrip) continue;
    for (const AddedToken& token : tokens) {
      const std::size_t length = utf8_length(token.pattern, 0);
      if (token.normalized == stripped.normalized &&
          is_added_token_space(utf8_decode(token.pattern, 0, length))) {
        throw InvalidArgument("added token " + quote_token(token.content) + " starts with a space" +
                              (token.pattern == token.content
                                   ? std::string()
                                   : " once normalized (" + quote_token(token.pattern) + ")") +
                              " and " + quote_token(stripped.content) +
                              " has rstrip: the library's splits of them overlap; not computed");
      }
    }
  }
}

// A normalized token is found as its normalized content: two found as one text would leave the
// library's choice between them to its automaton, and one found as nothing would match anywhere.
void refuse_ambiguous_patterns(const std::vector<AddedToken>& tokens) {
  std::set<std::pair<bool, std::string>> patterns;
  for (const AddedToken& token : tokens) {
    if (token.pattern.empty()) {
      throw InvalidArgument("added token " + quote_token(token.content) +
                            " is normalized to nothing; not computed");
    }
    if (!patterns.insert({token.normalized, token.pattern}).second) {
      throw InvalidArgument("added token " + quote_token(token.content) + " is found as " +
                            quote_token(token.pattern) +
                            ", as another token is; which one the library finds is not "
                            "computed");
    }
  }
}

SplitStep read_split(JsonObjectReader& reader) {
  const std::string field = reader.field("pattern");
  const nlohmann::json& pattern = reader.required("pattern");
  if (!pattern.is_object() || pattern.size() != 1 || !pattern.contains("Regex")) {
    throw InvalidArgument(
        "field '" + field + "' is " + echo_json(pattern) +
        ": only {\"Regex\": ...} with GPT-2's or Llama 3's expression is computed");
  }
  const std::string regex = json_string(pattern["Regex"], field + ".Regex");
  const std::optional<SplitPattern> known = known_split_pattern(regex);
  if (!known) {
    throw InvalidArgument("field '" + field + ".Regex' is '" + echo_input(regex, 200) +
                          "': only GPT-2's and Llama 3's expressions are computed");
  }
  const std::string behavior = reader.required_string("behavior");
  if (behavior != "Isolated") {
    throw InvalidArgument("field '" + reader.field("behavior") + "' is '" + echo_input(behavior) +
                          "': only Isolated is computed");
  }
  if (required_boolean(reader, "invert")) {
    throw InvalidArgument("field '" + reader.field("invert") + "' is true: not computed");
  }
  return {*known};
}

// The pieces of a template; a special piece's ids from the processor's special_tokens.
Template read_template(const nlohmann::json& list, const std::string& field,
                       const nlohmann::json& special_tokens, bool single) {
  if (!list.is_array()) {
    throw ParseError("field '" + field + "' must be a list, not " + json_type_name(list));
  }
  Template pieces;
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonObjectReader piece(list[i], element(field, i));
    TemplatePiece out;
    if (piece.has("Sequence")) {
      JsonObjectReader sequence(piece.required("Sequence"), piece.field("Sequence"));
      const std::string id = sequence.required_string("id");
      if (id != "A" && (single || id != "B")) {
        throw InvalidArgument("field '" + sequence.field("id") + "' is '" + echo_input(id) +
                              "': a " + (single ? "single" : "pair") +
                              " template holds sequence A" + (single ? "" : " and B"));
      }
      (void)sequence.required_integer("type_id");
      sequence.finish();
      out.is_sequence = true;
    } else {
      JsonObjectReader special(piece.required("SpecialToken"), piece.field("SpecialToken"));
      const std::string id = special.required_string("id");
      if (!special_tokens.contains(id)) {
        throw InvalidArgument("field '" + special.field("id") + "' is " + quote_token(id) +
                              ", which the processor's special_tokens lacks");
      }
      (void)special.required_integer("type_id");
      special.finish();
      for (const auto& value : special_tokens[id]["ids"]) {
        out.special_ids.push_back(static_cast<std::int32_t>(value.get<std::int64_t>()));
      }
    }
    piece.finish();
    pieces.push_back(std::move(out));
  }
  return pieces;
}

// special_tokens: {name: {id: name, ids: [...], tokens: [...]}}, every id in the vocabulary.
void check_special_tokens(const nlohmann::json& tokens, const std::string& field,
                          std::size_t vocab_size) {
  if (!tokens.is_object()) {
    throw ParseError("field '" + field + "' must be an object, not " + json_type_name(tokens));
  }
  for (const auto& [name, value] : tokens.items()) {
    JsonObjectReader token(value, field + "[" + quote_token(name) + "]");
    if (token.required_string("id") != name) {
      throw InvalidArgument("field '" + token.field("id") + "' is not its key " +
                            quote_token(name));
    }
    const nlohmann::json& ids = token.required("ids");
    const std::vector<std::int64_t> numbers =
        ::shardwise::detail::json_integer_list(ids, token.field("ids"));
    for (std::size_t i = 0; i < numbers.size(); ++i) {
      if (numbers[i] < 0 || static_cast<std::uint64_t>(numbers[i]) >= vocab_size) {
        throw InvalidArgument("field '" + element(token.field("ids"), i) + "' is " +
                              std::to_string(numbers[i]) + ", outside the vocabulary of " +
                              std::to_string(vocab_size) + " tokens");
      }
    }
    const auto names =
        ::shardwise::detail::json_string_list(token.required("tokens"), token.field("tokens"));
    if (names.size() != numbers.size()) {
      throw InvalidArgument("field '" + token.field("tokens") + "' has " +
                            std::to_string(names.size()) + " tokens for " +
                            std::to_string(numbers.size()) + " ids");
    }
    token.finish();
  }
}

// ByteLevel as a post-processor: its settings change offsets alone.
void read_byte_level_settings(JsonObjectReader& reader) {
  (void)required_boolean(reader, "add_prefix_space");
  (void)required_boolean(reader, "trim_offsets");
  (void)reader.boolean("use_regex", true);
}

}  // namespace

bool required_boolean(JsonObjectReader& reader, const std::string& key) {
  const nlohmann::json& value = reader.required(key);
  if (!value.is_boolean()) {
    throw ParseError("field '" + reader.field(key) + "' must be true or false, not " +
                     json_type_name(value));
  }
  return value.get<bool>();
}

bool nullable_boolean(JsonObjectReader& reader, const std::string& key, bool fallback) {
  const nlohmann::json* value = reader.optional(key);
  if (value == nullptr || value->is_null()) return fallback;
  return required_boolean(reader, key);
}

std::string quote_token(std::string_view token) { return "'" + echo_input(token, 60) + "'"; }

std::string echo_json(const nlohmann::json& value) {
  return echo_input(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 120);
}

std::vector<AddedToken> read_added_tokens(const nlohmann::json* list, const BpeModel& model,
                                          const std::vector<NormalizerStep>& normalizer) {
  std::vector<AddedToken> tokens;
  if (list == nullptr || list->is_null()) return tokens;
  if (!list->is_array()) {
    throw ParseError("field 'added_tokens' must be a list, not " + json_type_name(*list));
  }
  std::set<std::string> contents;
  std::int64_t next_id = static_cast<std::int64_t>(model.size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    JsonObjectReader reader((*list)[i], element("added_tokens", i));
    AddedToken token;
    const std::int64_t id = reader.required_integer("id");
    token.content = reader.required_string("content");
    token.single_word = required_boolean(reader, "single_word");
    token.lstrip = required_boolean(reader, "lstrip");
    token.rstrip = required_boolean(reader, "rstrip");
    token.normalized = required_boolean(reader, "normalized");
    token.special = required_boolean(reader, "special");
    reader.finish();
    if (token.content.empty()) {
      throw InvalidArgument("field '" + reader.field("content") + "' is empty");
    }
    if (!contents.insert(token.content).second) {
      throw InvalidArgument("added_tokens holds " + quote_token(token.content) + " twice");
    }
    // The library's id: the model's token of that content, else the next id past them all.
    const std::optional<std::int32_t> in_model = model.token_to_id(token.content);
    const std::int64_t expected = in_model ? *in_model : next_id++;
    if (id != expected || expected > INT32_MAX) {
      throw InvalidArgument("field '" + reader.field("id") + "' of " + quote_token(token.content) +
                            " is " + std::to_string(id) + ", but the library gives it " +
                            std::to_string(expected) +
                            (in_model ? " (its id in model.vocab)"
                                      : " (the next id past the vocabulary and the added "
                                        "tokens before it)"));
    }
    token.id = static_cast<std::int32_t>(id);
    token.pattern = token.normalized ? normalize(normalizer, token.content) : token.content;
    tokens.push_back(std::move(token));
  }
  refuse_ambiguous_patterns(tokens);
  refuse_overlapping_strips(tokens);
  return tokens;
}

void read_pre_tokenizer(const nlohmann::json& value, const std::string& field,
                        std::vector<PreTokenizerStep>& steps) {
  JsonObjectReader reader(value, field);
  const std::string type = reader.required_string("type");
  if (type == "Sequence") {
    const nlohmann::json& list = list_field(reader, "pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      read_pre_tokenizer(list[i], element(reader.field("pretokenizers"), i), steps);
    }
  } else if (type == "ByteLevel") {
    ByteLevelStep step;
    step.add_prefix_space = required_boolean(reader, "add_prefix_space");
    (void)required_boolean(reader, "trim_offsets");  // offsets alone
    step.use_regex = reader.boolean("use_regex", true);
    steps.emplace_back(step);
  } else if (type == "Split") {
    steps.emplace_back(read_split(reader));
  } else if (type == "Digits") {
    steps.emplace_back(DigitsStep{required_boolean(reader, "individual_digits")});
  } else if (type == "Metaspace") {
    MetaspaceStep step;
    step.replacement = read_character(reader, "replacement");
    step.prepend_scheme = read_prepend_scheme(reader);
    step.split = nullable_boolean(reader, "split", true);  // the library's default
    read_unused_str_rep(reader);
    steps.emplace_back(std::move(step));
  } else {
    throw InvalidArgument("field '" + reader.field("type") + "' is '" + echo_input(type) +
                          "': the pre-tokenizers computed are ByteLevel, Split, Digits, "
                          "Metaspace and Sequence");
  }
  reader.finish();
}

void read_post_processor(const nlohmann::json& value, const std::string& field,
                         std::size_t vocab_size, std::optional<Template>& post_template) {
  JsonObjectReader reader(value, field);
  const std::string type = reader.required_string("type");
  if (type == "Sequence") {
    const nlohmann::json& list = list_field(reader, "processors");
    for (std::size_t i = 0; i < list.size(); ++i) {
      read_post_processor(list[i], element(reader.field("processors"), i), vocab_size,
                          post_template);
    }
  } else if (type == "ByteLevel") {
    read_byte_level_settings(reader);
  } else if (type == "TemplateProcessing") {
    if (post_template) {
      throw InvalidArgument("field '" + field +
                            "' is a second TemplateProcessing: the library hands it the first's "
                            "pieces as sequences; not computed");
    }
    const nlohmann::json& special_tokens = reader.required("special_tokens");
    check_special_tokens(special_tokens, reader.field("special_tokens"), vocab_size);
    post_template =
        read_template(reader.required("single"), reader.field("single"), special_tokens, true);
    (void)read_template(reader.required("pair"), reader.field("pair"), special_tokens, false);
  } else {
    throw InvalidArgument("field '" + reader.field("type") + "' is '" + echo_input(type) +
                          "': the post-processors computed are ByteLevel, TemplateProcessing "
                          "and Sequence");
  }
  reader.finish();
}

}  // namespace shardwise::text::detail

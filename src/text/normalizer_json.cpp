// Reading tokenizer.json's "normalizer", and the plain string patterns and single characters
// that normalizers, pre-tokenizers and decoders share.

#include <string>
#include <vector>

#include "detail/tokenizer_json.hpp"
#include "detail/utf8.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::text::detail {

using ::shardwise::detail::json_string;
using ::shardwise::detail::json_type_name;

std::string read_string_pattern(JsonObjectReader& reader) {
  const std::string field = reader.field("pattern");
  const nlohmann::json& pattern = reader.required("pattern");
  if (!pattern.is_object() || pattern.size() != 1 || !pattern.contains("String")) {
    throw InvalidArgument("field '" + field + "' is " + echo_json(pattern) +
                          ": only a plain {\"String\": ...} pattern is computed");
  }
  std::string text = json_string(pattern["String"], field + ".String");
  if (text.empty()) {
    throw InvalidArgument("field '" + field +
                          ".String' is \"\": an empty pattern matches between every two "
                          "characters; not computed");
  }
  return text;
}

std::string read_character(JsonObjectReader& reader, const std::string& key) {
  std::string text = reader.required_string(key);
  if (text.empty() || utf8_length(text, 0) != text.size()) {
    throw InvalidArgument("field '" + reader.field(key) + "' is '" + echo_input(text) +
                          "': one character is expected");
  }
  return text;
}

PrependScheme read_prepend_scheme(JsonObjectReader& reader) {
  PrependScheme scheme = PrependScheme::kAlways;
  if (reader.has("prepend_scheme")) {
    const std::string text = reader.required_string("prepend_scheme");
    if (text == "first") {
      scheme = PrependScheme::kFirst;
    } else if (text == "never") {
      scheme = PrependScheme::kNever;
    } else if (text != "always") {
      throw InvalidArgument("field '" + reader.field("prepend_scheme") + "' is '" +
                            echo_input(text) + "': \"always\", \"first\" or \"never\" is expected");
    }
  }
  if (!nullable_boolean(reader, "add_prefix_space", true) && scheme != PrependScheme::kNever) {
    throw InvalidArgument("field '" + reader.field("add_prefix_space") +
                          "' is false but the prepend_scheme is not \"never\": the library "
                          "refuses that");
  }
  return scheme;
}

void read_unused_str_rep(JsonObjectReader& reader) {
  const nlohmann::json* value = reader.optional("str_rep");
  if (value != nullptr && !value->is_null()) (void)json_string(*value, reader.field("str_rep"));
}

void read_normalizer(const nlohmann::json& value, const std::string& field,
                     std::vector<NormalizerStep>& steps) {
  JsonObjectReader reader(value, field);
  const std::string type = reader.required_string("type");
  if (type == "Sequence") {
    const nlohmann::json& list = reader.required("normalizers");
    if (!list.is_array()) {
      throw ParseError("field '" + reader.field("normalizers") + "' must be a list, not " +
                       json_type_name(list));
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      read_normalizer(list[i], reader.field("normalizers") + "[" + std::to_string(i) + "]", steps);
    }
  } else if (type == "Prepend") {
    steps.emplace_back(PrependStep{reader.required_string("prepend")});
  } else if (type == "Replace") {
    std::string pattern = read_string_pattern(reader);
    steps.emplace_back(ReplaceStep{std::move(pattern), reader.required_string("content")});
  } else {
    throw InvalidArgument("field '" + reader.field("type") + "' is '" + echo_input(type) +
                          "': the normalizers computed are Prepend, Replace (of a plain string) "
                          "and Sequence");
  }
  reader.finish();
}

}  // namespace shardwise::text::detail

// Reading tokenizer.json's "decoder": ByteLevel, or a SentencePiece-style chain of Replace,
// ByteFallback, Fuse and Strip, or Metaspace; a Sequence's steps flattened.

#include <optional>
#include <string>
#include <vector>

#include "detail/tokenizer_json.hpp"
#include "detail/utf8.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::text::detail {
namespace {

using ::shardwise::detail::json_type_name;

void read_steps(const nlohmann::json& value, const std::string& field,
                std::vector<DecoderStep>& steps) {
  JsonObjectReader reader(value, field);
  const std::string type = reader.required_string("type");
  if (type == "Sequence") {
    const nlohmann::json& list = reader.required("decoders");
    if (!list.is_array()) {
      throw ParseError("field '" + reader.field("decoders") + "' must be a list, not " +
                       json_type_name(list));
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      read_steps(list[i], reader.field("decoders") + "[" + std::to_string(i) + "]", steps);
    }
  } else if (type == "ByteLevel") {
    // Its settings change offsets alone.
    (void)required_boolean(reader, "add_prefix_space");
    (void)required_boolean(reader, "trim_offsets");
    (void)reader.boolean("use_regex", true);
    steps.emplace_back(ByteLevelDecoder{});
  } else if (type == "Replace") {
    std::string pattern = read_string_pattern(reader);
    steps.emplace_back(ReplaceDecoder{std::move(pattern), reader.required_string("content")});
  } else if (type == "ByteFallback") {
    steps.emplace_back(ByteFallbackDecoder{});
  } else if (type == "Fuse") {
    steps.emplace_back(FuseDecoder{});
  } else if (type == "Strip") {
    const std::string content = read_character(reader, "content");
    const std::int64_t start = reader.required_integer("start");
    const std::int64_t stop = reader.required_integer("stop");
    if (start < 0 || stop != 0) {
      throw InvalidArgument("field '" + reader.field(start < 0 ? "start" : "stop") + "' is " +
                            std::to_string(start < 0 ? start : stop) +
                            ": a Strip decoder's start of 0 or more and stop of 0 are computed "
                            "(the library fails on a token shorter than its stop)");
    }
    steps.emplace_back(
        StripDecoder{utf8_decode(content, 0, content.size()), static_cast<std::size_t>(start)});
  } else if (type == "Metaspace") {
    std::string replacement = read_character(reader, "replacement");
    const PrependScheme scheme = read_prepend_scheme(reader);
    (void)nullable_boolean(reader, "split", true);  // splitting is the pre-tokenizer's alone
    read_unused_str_rep(reader);
    steps.emplace_back(MetaspaceDecoder{std::move(replacement), scheme != PrependScheme::kNever});
  } else {
    throw InvalidArgument("field '" + reader.field("type") + "' is '" + echo_input(type) +
                          "': the decoders computed are ByteLevel, Replace (of a plain string), "
                          "ByteFallback, Fuse, Strip, Metaspace and Sequence");
  }
  reader.finish();
}

}  // namespace

std::optional<std::vector<DecoderStep>> read_decoder(const nlohmann::json& value) {
  if (value.is_null()) return std::nullopt;
  std::vector<DecoderStep> steps;
  read_steps(value, "decoder", steps);
  return steps;
}

}  // namespace shardwise::text::detail

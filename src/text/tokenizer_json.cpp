// Tokenizer::from_file and from_json: a tokenizer.json read whole, each part by its reader
// (model_json.cpp, pipeline_json.cpp), every error one InvalidArgument naming the file.

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "../detail/file_io.hpp"
#include "detail/tokenizer_json.hpp"
#include "detail/tokenizer_parts.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {
namespace {

using detail::echo_json;
using detail::JsonObjectReader;

// A setting that changes the ids but is not computed: only null (or absent) is read.
void refuse_unless_null(JsonObjectReader& reader, const std::string& key, const char* why) {
  const nlohmann::json* value = reader.optional(key);
  if (value != nullptr && !value->is_null()) {
    throw InvalidArgument("field '" + key + "' is " + echo_json(*value) + ": " + why);
  }
}

std::shared_ptr<const Tokenizer::Parts> read_parts(const nlohmann::json& document) {
  JsonObjectReader reader(document, "");
  if (const nlohmann::json* version = reader.optional("version"); version && *version != "1.0") {
    throw InvalidArgument("field 'version' is " + echo_json(*version) +
                          ": the library reads version \"1.0\" alone");
  }
  refuse_unless_null(reader, "truncation", "truncation is not computed (only null)");
  refuse_unless_null(reader, "padding", "padding is not computed (only null)");
  std::vector<detail::NormalizerStep> normalizer;
  if (const nlohmann::json* value = reader.optional("normalizer"); value && !value->is_null()) {
    detail::read_normalizer(*value, "normalizer", normalizer);
  }
  detail::BpeModel model = detail::read_bpe_model(reader.required("model"));
  std::vector<detail::AddedToken> added =
      detail::read_added_tokens(reader.optional("added_tokens"), model, normalizer);
  // The added tokens that are not the model's own take the ids after the model's.
  std::size_t vocab_size = model.size();
  for (const detail::AddedToken& token : added) {
    if (static_cast<std::size_t>(token.id) >= model.size()) ++vocab_size;
  }
  std::vector<detail::PreTokenizerStep> steps;
  if (const nlohmann::json* value = reader.optional("pre_tokenizer"); value && !value->is_null()) {
    detail::read_pre_tokenizer(*value, "pre_tokenizer", steps);
  }
  std::optional<detail::Template> post_template;
  if (const nlohmann::json* value = reader.optional("post_processor"); value && !value->is_null()) {
    detail::read_post_processor(*value, "post_processor", vocab_size, post_template);
  }
  std::optional<std::vector<detail::DecoderStep>> decoder;
  if (const nlohmann::json* value = reader.optional("decoder"); value != nullptr) {
    decoder = detail::read_decoder(*value);
  }
  reader.finish();
  Tokenizer::Parts parts{std::move(normalizer),
                         detail::AddedVocabulary(std::move(added)),
                         std::move(steps),
                         std::move(model),
                         std::move(post_template),
                         std::move(decoder),
                         vocab_size};
  parts.spaces_start_pieces = spaces_start_pieces(parts.model);
  return std::make_shared<const Tokenizer::Parts>(std::move(parts));
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  const std::string text = ::shardwise::detail::read_file(path.string(), "tokenizer file");
  return from_json(text, "tokenizer file '" + echo_input(path.string()) + "'");
}

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& what) {
  nlohmann::json document;
  try {
    document = ::shardwise::detail::parse_json(text, what);
  } catch (const ParseError& e) {
    throw InvalidArgument(e.what());  // names `what` already
  }
  try {
    return Tokenizer(read_parts(document));
  } catch (const Error& e) {
    throw InvalidArgument(what + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(what + ": " + echo_input(e.what(), 200));
  }
}

}  // namespace shardwise::text

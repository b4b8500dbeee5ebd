#include "shardwise/text/tokenizer.hpp"

#include <string>

#include "detail/tokenizer_parts.hpp"
#include "detail/utf8.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::text {

// As the library's pipeline: the added tokens that are not normalized split the text; each
// piece between them is normalized and split on the added tokens that are; each piece left is
// pre-tokenized and merged by the model.
std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return encode_text(text, add_special_tokens, false);
}

std::vector<std::int32_t> Tokenizer::encode_continuing(std::string_view text) const {
  return encode_text(text, false, true);
}

std::vector<std::int32_t> Tokenizer::encode_text(std::string_view text, bool add_special_tokens,
                                                 bool continues) const {
  detail::require_utf8(text, "the text to encode");
  std::vector<std::int32_t> ids;
  std::string normalized;
  std::vector<detail::Segment> segments;
  // A text that continues another: the piece it starts with continues the other's last, whose
  // start a Prepend has marked already.
  std::vector<detail::NormalizerStep> continuing;
  if (continues) {
    for (const detail::NormalizerStep& step : parts_->normalizer) {
      if (!std::holds_alternative<detail::PrependStep>(step)) continuing.push_back(step);
    }
  }
  for (const detail::Segment& raw : parts_->added.split_raw(text)) {
    if (raw.added_id) {
      ids.push_back(*raw.added_id);
      continue;
    }
    std::string_view piece = raw.text;
    const bool raw_starts_text = raw.text.data() == text.data();
    if (!parts_->normalizer.empty()) {
      normalized =
          detail::normalize(continues && raw_starts_text ? continuing : parts_->normalizer, piece);
      piece = normalized;
    }
    parts_->added.split_normalized(piece, segments);
    for (const detail::Segment& segment : segments) {
      if (segment.added_id) {
        ids.push_back(*segment.added_id);
        continue;
      }
      if (parts_->pre_tokenizer.empty()) {  // one word, not copied: it may be the whole text
        parts_->model.tokenize(segment.text, ids);
        continue;
      }
      const bool starts_text = !continues && raw_starts_text && segment.text.data() == piece.data();
      for (const std::string& word :
           detail::pre_tokenize(parts_->pre_tokenizer, segment.text, starts_text)) {
        parts_->model.tokenize(word, ids);
      }
    }
  }
  if (parts_->post_template) {
    return detail::apply_template(*parts_->post_template, ids, add_special_tokens);
  }
  return ids;
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= parts_->vocab_size) return std::nullopt;
  if (const detail::AddedToken* added = parts_->added.find_id(id)) return added->content;
  return parts_->model.token(id);
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= parts_->vocab_size) {
      throw InvalidArgument("decode: id " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(parts_->vocab_size) + " tokens");
    }
    // The decoder sees an added token that is normalized as the normalizer spells it ("▁hello"
    // for "hello"), as the library's decode does since 0.23 (simple_id_to_token).
    const detail::AddedToken* added = parts_->added.find_id(id);
    const std::string& token = added != nullptr ? added->pattern : parts_->model.token(id);
    // The library skips a token whose text is a special token's, whichever id it came from.
    if (skip_special_tokens) {
      const detail::AddedToken* named = parts_->added.find_content(token);
      if (named != nullptr && named->special) continue;
    }
    tokens.push_back(token);
  }
  if (parts_->decoder) return detail::decode_tokens(*parts_->decoder, std::move(tokens));
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) text += ' ';
    text += tokens[i];
  }
  return text;
}

std::size_t Tokenizer::vocab_size() const { return parts_->vocab_size; }

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const detail::AddedToken* added = parts_->added.find_content(token)) return added->id;
  return parts_->model.token_to_id(token);
}

}  // namespace shardwise::text

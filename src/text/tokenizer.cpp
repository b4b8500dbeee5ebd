#include "shardwise/text/tokenizer.hpp"

#include <string>

#include "detail/byte_level.hpp"
#include "detail/tokenizer_parts.hpp"
#include "detail/utf8.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::text {

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  detail::require_utf8(text, "the text to encode");
  std::vector<std::int32_t> ids;
  for (const detail::Segment& segment : parts_->added.split(text)) {
    if (segment.added_id) {
      ids.push_back(*segment.added_id);
      continue;
    }
    for (const std::string& piece : detail::pre_tokenize(parts_->pre_tokenizer, segment.text)) {
      parts_->model.tokenize(piece, ids);
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
  std::string bytes;
  bool first = true;
  for (const std::int32_t id : ids) {
    const std::optional<std::string> token = id_to_token(id);
    if (!token) {
      throw InvalidArgument("decode: id " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(parts_->vocab_size) + " tokens");
    }
    // The library skips a token whose text is a special token's, whichever id it came from.
    if (skip_special_tokens) {
      const detail::AddedToken* added = parts_->added.find_content(*token);
      if (added != nullptr && added->special) continue;
    }
    if (parts_->byte_level_decoder) {
      detail::append_token_bytes(*token, bytes);
    } else {
      if (!first) bytes += ' ';
      bytes += *token;
    }
    first = false;
  }
  return parts_->byte_level_decoder ? detail::utf8_lossy(bytes) : bytes;
}

std::size_t Tokenizer::vocab_size() const { return parts_->vocab_size; }

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const detail::AddedToken* added = parts_->added.find_content(token)) return added->id;
  return parts_->model.token_to_id(token);
}

}  // namespace shardwise::text

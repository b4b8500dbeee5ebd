// Where each token of an encoded text lies in it (Tokenizer::token_spans): what marks the tokens
// of a byte range (an assistant's turn in a rendered conversation) as transformers' offsets and
// char_to_token mark them.

#include <optional>
#include <string>

#include "detail/byte_level.hpp"
#include "detail/tokenizer_parts.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// The byte a token "<0xNN>" stands for.
std::optional<char> fallback_byte(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  int value = 0;
  for (const char c : token.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<char>(value);
}

bool byte_level(const Tokenizer::Parts& parts) {
  for (const detail::PreTokenizerStep& step : parts.pre_tokenizer) {
    if (std::holds_alternative<detail::ByteLevelStep>(step)) return true;
  }
  return false;
}

// The space mark a SentencePiece-style pipeline writes: Metaspace's replacement, else "▁".
std::string space_mark(const Tokenizer::Parts& parts) {
  for (const detail::PreTokenizerStep& step : parts.pre_tokenizer) {
    if (const auto* metaspace = std::get_if<detail::MetaspaceStep>(&step)) {
      return metaspace->replacement;
    }
  }
  return "\u2581";
}

// The bytes a model token stands for.
std::string surface(const std::string& token, bool bytes, const std::string& mark) {
  std::string out;
  if (bytes) {
    detail::append_token_bytes(token, out);
    return out;
  }
  if (const std::optional<char> byte = fallback_byte(token)) return std::string(1, *byte);
  for (std::size_t at = 0; at < token.size();) {
    if (!mark.empty() && token.compare(at, mark.size(), mark) == 0) {
      out += ' ';
      at += mark.size();
    } else {
      out += token[at++];
    }
  }
  return out;
}

}  // namespace

std::vector<Tokenizer::Span> Tokenizer::token_spans(std::string_view text,
                                                    std::span<const std::int32_t> ids) const {
  const bool bytes = byte_level(*parts_);
  const std::string mark = space_mark(*parts_);
  std::vector<Span> spans;
  spans.reserve(ids.size());
  std::size_t at = 0;
  const auto refuse = [&](std::size_t index, const std::string& token) {
    return InvalidArgument("token " + std::to_string(index) + " (\"" + echo_input(token, 40) +
                           "\") cannot be laid over the text at byte " + std::to_string(at));
  };
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (id < 0 || static_cast<std::size_t>(id) >= parts_->vocab_size) {
      throw InvalidArgument("token " + std::to_string(i) + " is the id " + std::to_string(id) +
                            ", outside the vocabulary");
    }
    if (const detail::AddedToken* added = parts_->added.find_id(id)) {
      if (added->lstrip) {
        while (at < text.size() && is_space(text[at])) ++at;
      }
      if (text.compare(at, added->content.size(), added->content) != 0) {
        throw refuse(i, added->content);
      }
      spans.push_back({at, at + added->content.size()});
      at += added->content.size();
      if (added->rstrip) {
        while (at < text.size() && is_space(text[at])) ++at;
      }
      continue;
    }
    const std::string& token = parts_->model.token(id);
    const std::string piece = surface(token, bytes, mark);
    if (text.compare(at, piece.size(), piece) == 0) {
      spans.push_back({at, at + piece.size()});
      at += piece.size();
    } else if (piece.starts_with(' ') &&
               text.compare(at, piece.size() - 1, std::string_view(piece).substr(1)) == 0) {
      // The space a prefix scheme put before the piece: no byte of the text.
      spans.push_back({at, at + piece.size() - 1});
      at += piece.size() - 1;
    } else {
      throw refuse(i, token);
    }
  }
  if (at != text.size()) {
    throw InvalidArgument("the tokens stand for " + std::to_string(at) + " of the text's " +
                          std::to_string(text.size()) + " bytes");
  }
  return spans;
}

}  // namespace shardwise::text

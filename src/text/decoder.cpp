#include "detail/decoder.hpp"

#include <optional>
#include <utility>

#include "detail/byte_level.hpp"
#include "detail/normalizer.hpp"
#include "detail/utf8.hpp"

namespace shardwise::text::detail {
namespace {

using Tokens = std::vector<std::string>;

const std::string kReplacementCharacter = "\xef\xbf\xbd";  // U+FFFD

Tokens byte_level(const Tokens& tokens) {
  std::string bytes;
  for (const std::string& token : tokens) append_token_bytes(token, bytes);
  return {utf8_lossy(bytes)};
}

Tokens replace(const ReplaceDecoder& step, const Tokens& tokens) {
  std::size_t size = 0;
  for (const std::string& token : tokens) size += token.size();
  std::size_t left = most_bytes_from(size);  // for all the tokens together
  Tokens out;
  out.reserve(tokens.size());
  for (const std::string& token : tokens) {
    std::string replaced;
    append_replaced(token, step.pattern, step.content, replaced, left);
    left -= replaced.size();
    out.push_back(std::move(replaced));
  }
  return out;
}

bool is_utf8(const std::string& bytes) {
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t length = utf8_length(bytes, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte a token "<0xNN>" stands for, read as the library reads it: six bytes, and the two
// between "<0x" and ">" parsed by Rust's u8::from_str_radix(_, 16), which takes a leading '+'.
std::optional<unsigned char> byte_token(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  const int high = token[3] == '+' ? 0 : hex_digit(token[3]);
  const int low = hex_digit(token[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<unsigned char>(high * 16 + low);
}

Tokens byte_fallback(Tokens tokens) {
  Tokens out;
  out.reserve(tokens.size());
  std::string bytes;
  const auto flush = [&] {
    if (bytes.empty()) return;
    if (is_utf8(bytes)) {
      out.push_back(bytes);
    } else {
      for (std::size_t i = 0; i < bytes.size(); ++i) out.push_back(kReplacementCharacter);
    }
    bytes.clear();
  };
  for (std::string& token : tokens) {
    if (const std::optional<unsigned char> byte = byte_token(token)) {
      bytes += static_cast<char>(*byte);
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

Tokens fuse(const Tokens& tokens) {
  std::string joined;
  for (const std::string& token : tokens) joined += token;
  return {joined};
}

Tokens strip(const StripDecoder& step, Tokens tokens) {
  for (std::string& token : tokens) {
    std::size_t cut = 0;
    for (std::size_t n = 0; n < step.start && cut < token.size(); ++n) {
      const std::size_t length = utf8_length(token, cut);
      if (length == 0 || utf8_decode(token, cut, length) != step.content) break;
      cut += length;
    }
    token.erase(0, cut);
  }
  return tokens;
}

Tokens metaspace(const MetaspaceDecoder& step, const Tokens& tokens) {
  Tokens out;
  out.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string text;
    append_replaced(tokens[i], step.replacement, i == 0 && step.drops_in_first ? "" : " ", text);
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace

std::string decode_tokens(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens) {
  for (const DecoderStep& step : steps) {
    if (std::holds_alternative<ByteLevelDecoder>(step)) {
      tokens = byte_level(tokens);
    } else if (const auto* replace_step = std::get_if<ReplaceDecoder>(&step)) {
      tokens = replace(*replace_step, tokens);
    } else if (std::holds_alternative<ByteFallbackDecoder>(step)) {
      tokens = byte_fallback(std::move(tokens));
    } else if (std::holds_alternative<FuseDecoder>(step)) {
      tokens = fuse(tokens);
    } else if (const auto* strip_step = std::get_if<StripDecoder>(&step)) {
      tokens = strip(*strip_step, std::move(tokens));
    } else {
      tokens = metaspace(std::get<MetaspaceDecoder>(step), tokens);
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace shardwise::text::detail

#include "detail/byte_level.hpp"

#include <array>

#include "detail/utf8.hpp"

namespace shardwise::text::detail {
namespace {

bool stands_for_itself(unsigned char byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
}

// The bytes that do not stand for themselves: 0x00-0x20, 0x7f-0xa0 and 0xad.
constexpr std::size_t kShifted = 68;

struct Alphabet {
  std::array<char32_t, 256> character{};
  std::array<unsigned char, kShifted> shifted_byte{};  // the byte of U+0100 + i
  Alphabet() {
    std::size_t next = 0;
    for (int byte = 0; byte < 256; ++byte) {
      const auto b = static_cast<unsigned char>(byte);
      if (stands_for_itself(b)) {
        character[b] = b;
      } else {
        shifted_byte[next] = b;
        character[b] = static_cast<char32_t>(0x100 + next++);
      }
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

char32_t byte_character(unsigned char byte) { return alphabet().character[byte]; }

std::optional<unsigned char> character_byte(char32_t c) {
  if (c < 0x100) {
    if (stands_for_itself(static_cast<unsigned char>(c))) return static_cast<unsigned char>(c);
    return std::nullopt;
  }
  if (c - 0x100 < kShifted) return alphabet().shifted_byte[c - 0x100];
  return std::nullopt;
}

std::string byte_level_spelling(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes) append_utf8(out, byte_character(static_cast<unsigned char>(byte)));
  return out;
}

void append_token_bytes(std::string_view token, std::string& out) {
  const std::size_t start = out.size();
  for (std::size_t at = 0; at < token.size();) {
    const std::size_t length = utf8_length(token, at);
    const std::optional<unsigned char> byte =
        length == 0 ? std::nullopt : character_byte(utf8_decode(token, at, length));
    if (!byte) {
      out.resize(start);
      out.append(token);
      return;
    }
    out += static_cast<char>(*byte);
    at += length;
  }
}

}  // namespace shardwise::text::detail

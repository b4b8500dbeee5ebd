#include "detail/utf8.hpp"

#include <cstdio>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::text::detail {
namespace {

// How many bytes at text[at] begin a well-formed sequence: its whole length where it is one,
// else the bytes before the first that cannot continue it (at least 1: the lead byte). Ranges
// of the second byte are narrower after some leads (no overlong forms, surrogates or code
// points past U+10FFFF).
struct Prefix {
  std::size_t valid;     // bytes that fit a sequence
  std::size_t expected;  // the sequence's length by its lead byte (0: no lead byte)
};
Prefix utf8_prefix(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {1, 1};
  std::size_t expected = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    expected = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    expected = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    expected = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return {1, 0};
  }
  std::size_t valid = 1;
  while (valid < expected && at + valid < text.size()) {
    const unsigned char next = byte(valid);
    if (valid == 1 ? (next < low || next > high) : (next < 0x80 || next > 0xbf)) break;
    ++valid;
  }
  return {valid, expected};
}

}  // namespace

std::size_t utf8_length(std::string_view text, std::size_t at) {
  const Prefix prefix = utf8_prefix(text, at);
  return prefix.valid == prefix.expected ? prefix.valid : 0;
}

char32_t utf8_decode(std::string_view text, std::size_t at, std::size_t length) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  if (length == 1) return byte(0);
  static constexpr unsigned char kLeadMask[] = {0, 0, 0x1f, 0x0f, 0x07};
  char32_t value = byte(0) & kLeadMask[length];
  for (std::size_t i = 1; i < length; ++i) value = (value << 6) | (byte(i) & 0x3f);
  return value;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

CodePoints code_points(std::string_view text) {
  CodePoints out;
  out.values.reserve(text.size());
  out.offsets.reserve(text.size() + 1);
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t length = utf8_length(text, at);
    if (length == 0) {
      throw InvalidArgument("the byte at offset " + std::to_string(at) + " is not UTF-8");
    }
    out.values.push_back(utf8_decode(text, at, length));
    out.offsets.push_back(at);
    at += length;
  }
  out.offsets.push_back(text.size());
  return out;
}

void require_utf8(std::string_view text, std::string_view what) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = utf8_length(text, at);
    if (length == 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[at]));
      throw InvalidArgument(std::string(what) + " is not UTF-8: byte " + byte + " at offset " +
                            std::to_string(at));
    }
    at += length;
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t at = 0;
  while (at < bytes.size()) {
    const Prefix prefix = utf8_prefix(bytes, at);
    if (prefix.valid == prefix.expected) {
      out.append(bytes.substr(at, prefix.valid));
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
    }
    at += prefix.valid;
  }
  return out;
}

}  // namespace shardwise::text::detail

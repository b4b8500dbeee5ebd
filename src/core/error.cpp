#include "shardwise/core/error.hpp"

#include <cstdio>

namespace shardwise {
namespace {

// The length of the well-formed UTF-8 sequence at text[at] (1 to 4), or 0 where there is none
// (a stray continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a
// sequence cut short).
std::size_t utf8_sequence_length(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;  // the second byte's range, narrower for some leads
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

void append_escaped(std::string& out, unsigned char c) {
  char escaped[8];
  std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
  out += escaped;
}

}  // namespace

std::string echo_input(std::string_view text, std::size_t max_chars) {
  std::string out;
  std::size_t used = 0;
  while (used < text.size() && out.size() < max_chars) {
    const auto c = static_cast<unsigned char>(text[used]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      append_escaped(out, c);
    } else if (c >= 0x80) {
      const std::size_t length = utf8_sequence_length(text, used);
      if (length == 0) {
        append_escaped(out, c);
      } else {
        out.append(text.substr(used, length));
        used += length;
        continue;
      }
    } else {
      out += static_cast<char>(c);
    }
    ++used;
  }
  if (used < text.size()) {
    out += "... (" + std::to_string(text.size() - used) + " more bytes)";
  }
  return out;
}

std::string utf8_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::size_t length = utf8_sequence_length(bytes, at);
    if (length == 0) {
      append_escaped(out, static_cast<unsigned char>(bytes[at]));
      ++at;
    } else {
      out.append(bytes.substr(at, length));
      at += length;
    }
  }
  return out;
}

}  // namespace shardwise

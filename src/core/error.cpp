#include "shardwise/core/error.hpp"

#include <cstdio>

namespace shardwise {

std::string echo_input(std::string_view text, std::size_t max_chars) {
  std::string out;
  std::size_t used = 0;
  for (; used < text.size() && out.size() < max_chars; ++used) {
    const auto c = static_cast<unsigned char>(text[used]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (used < text.size()) {
    out += "... (" + std::to_string(text.size() - used) + " more bytes)";
  }
  return out;
}

}  // namespace shardwise

#pragma once
// UTF-8 as the tokenizer reads and writes it: code points with their byte offsets, and bytes
// made text the way Rust's String::from_utf8_lossy makes it (the library's decode).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise::text::detail {

// The length (1 to 4) of the well-formed UTF-8 sequence at text[at], or 0 where none starts
// there (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
[[nodiscard]] std::size_t utf8_length(std::string_view text, std::size_t at);

// The code point of the well-formed sequence of `length` bytes at text[at].
[[nodiscard]] char32_t utf8_decode(std::string_view text, std::size_t at, std::size_t length);

void append_utf8(std::string& out, char32_t code_point);

// Well-formed UTF-8 as its code points, with the byte offset of each and of the end.
struct CodePoints {
  std::vector<char32_t> values;
  std::vector<std::size_t> offsets;  // values.size() + 1 entries: where each one starts, the end
};
// InvalidArgument naming the offset of the first byte that is not UTF-8.
[[nodiscard]] CodePoints code_points(std::string_view text);

// Throws InvalidArgument (naming `what` and the byte's offset) unless `text` is UTF-8.
void require_utf8(std::string_view text, std::string_view what);

// `bytes` with each maximal run of bytes that is not (the start of) a well-formed sequence
// replaced by U+FFFD, as Rust's from_utf8_lossy: "\xe2\x82A" gives "\ufffdA", and a surrogate's
// three bytes "\xed\xa0\x80" give three U+FFFD.
[[nodiscard]] std::string utf8_lossy(std::string_view bytes);

}  // namespace shardwise::text::detail

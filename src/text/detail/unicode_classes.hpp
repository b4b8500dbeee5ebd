#pragma once
// The character classes the tokenizers library splits text with, each as the library computes
// it: its regular expressions' \p{L}, \p{N} and \s (Oniguruma), the Digits pre-tokenizer's
// numerics (Rust's char::is_numeric) and an added token's \w and \s (Rust's regex crate). The
// ranges are measured on the library (unicode_tables.cpp, written by
// tests/text/make_unicode_tables.py): its Unicode versions are newer than the system's ICU's.

#include <span>

namespace shardwise::text::detail {

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
};

// The sorted, disjoint ranges of each class (unicode_tables.cpp).
std::span<const CodePointRange> regex_letters();
std::span<const CodePointRange> regex_numbers();
std::span<const CodePointRange> regex_spaces();
std::span<const CodePointRange> digits_numerics();
std::span<const CodePointRange> added_token_word_characters();
std::span<const CodePointRange> added_token_spaces();

[[nodiscard]] bool is_letter(char32_t c);   // \p{L}
[[nodiscard]] bool is_number(char32_t c);   // \p{N}
[[nodiscard]] bool is_space(char32_t c);    // \s
[[nodiscard]] bool is_numeric(char32_t c);  // char::is_numeric
[[nodiscard]] bool is_added_token_word_character(char32_t c);
[[nodiscard]] bool is_added_token_space(char32_t c);

}  // namespace shardwise::text::detail

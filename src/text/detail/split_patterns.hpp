#pragma once
// The regular expressions byte-level tokenizers split text with, each matched by a scanner of
// its own rather than a regex engine: both end in a lookahead (\s+(?!\S)), which RE2 lacks, and
// a scanner does one pass over the text. A pattern is recognised by its exact text; any other
// is refused by the reader, naming it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise::text::detail {

enum class SplitPattern {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // (GPT-2's, the ByteLevel pre-tokenizer's with use_regex)
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+  (Llama 3's)
  kLlama3,
};

[[nodiscard]] std::string_view split_pattern_text(SplitPattern pattern);
// The pattern whose text `regex` is exactly.
[[nodiscard]] std::optional<SplitPattern> known_split_pattern(std::string_view regex);

// Appends the pieces of `text` (UTF-8) that the pattern's successive leftmost matches make,
// each match and each run between two matches a piece (the "Isolated" behaviour), as
// Oniguruma's leftmost-first, backtracking search finds them.
void split_isolated(SplitPattern pattern, std::string_view text, std::vector<std::string>& out);

}  // namespace shardwise::text::detail

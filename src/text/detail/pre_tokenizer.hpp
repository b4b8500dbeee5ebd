#pragma once
// The pre-tokenizers of byte-level tokenizers, applied as the library applies a Sequence of
// them: each step splits every piece the steps before it left (pieces are never joined again),
// and ByteLevel also respells each piece in the byte-level alphabet, which the steps after it
// then see. Empty pieces are dropped, as the library drops them.

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "split_patterns.hpp"

namespace shardwise::text::detail {

struct ByteLevelStep {
  bool add_prefix_space = false;  // a space before each piece that does not start with one
  bool use_regex = true;          // split on GPT-2's expression first
};
// Split {pattern: {Regex}, behavior: Isolated, invert: false}.
struct SplitStep {
  SplitPattern pattern;
};
// Digits: numerics (char::is_numeric) one a piece, or runs of them.
struct DigitsStep {
  bool individual_digits = false;
};
using PreTokenizerStep = std::variant<ByteLevelStep, SplitStep, DigitsStep>;

// The pieces of `text` (UTF-8) after every step, in order.
[[nodiscard]] std::vector<std::string> pre_tokenize(const std::vector<PreTokenizerStep>& steps,
                                                    std::string_view text);

}  // namespace shardwise::text::detail

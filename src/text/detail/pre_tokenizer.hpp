#pragma once
// The pre-tokenizers of byte-level tokenizers and SentencePiece-style ones (Metaspace), applied
// as the library applies a Sequence of them: each step splits every piece the steps before it
// left (pieces are never joined again), and ByteLevel and Metaspace also rewrite each piece
// (the byte-level alphabet, "▁" for spaces), which the steps after them then see. Empty pieces
// are dropped, as the library drops them.

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
// Metaspace: each space (U+0020 alone) becomes `replacement`, which is then prepended to a piece
// that does not start with it (always; first: only to the piece that starts the whole text;
// never), and with `split` each replacement starts a piece of its own ("▁a▁▁b": "▁a", "▁", "▁b").
enum class PrependScheme { kAlways, kFirst, kNever };
struct MetaspaceStep {
  std::string replacement;  // one character, UTF-8
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
};
using PreTokenizerStep = std::variant<ByteLevelStep, SplitStep, DigitsStep, MetaspaceStep>;

// The pieces of `text` (UTF-8) after every step, in order. `starts_text`: `text` begins the text
// being encoded (no added token before it), for Metaspace's "first" scheme.
[[nodiscard]] std::vector<std::string> pre_tokenize(const std::vector<PreTokenizerStep>& steps,
                                                    std::string_view text, bool starts_text);

}  // namespace shardwise::text::detail

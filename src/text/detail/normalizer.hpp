#pragma once
// The normalizers SentencePiece-style tokenizers ship (Llama 2's, TinyLlama's, Mistral's
// Sequence [Prepend "▁", Replace " " -> "▁"]), applied as the library applies them: to each
// piece of the text between the added tokens that are not normalized, never to the text whole,
// and to the contents of the added tokens that are.

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace shardwise::text::detail {

// Prepend: `text` before a piece that is not empty.
struct PrependStep {
  std::string text;
};
// Replace with a plain string pattern: each leftmost match, left to right and without overlap,
// becomes `content`. The pattern is never empty (the reader refuses that).
struct ReplaceStep {
  std::string pattern;
  std::string content;
};
using NormalizerStep = std::variant<PrependStep, ReplaceStep>;

// `text` after every step in order (the empty list is no normalizer). InvalidArgument where the
// steps would make more than most_bytes_from(text.size()) bytes of it.
[[nodiscard]] std::string normalize(const std::vector<NormalizerStep>& steps,
                                    std::string_view text);

// The most bytes a normalizer or a decoder's Replace may make of `size` bytes: a file whose
// steps grow a text past it (a long content, Replaces that feed each other) is refused as it
// runs rather than exhausting memory. Llama 2's make at most three times the text and three
// bytes.
[[nodiscard]] constexpr std::size_t most_bytes_from(std::size_t size) { return 16 * size + 4096; }

// Appends `text` with each match of `pattern` (not empty) replaced by `content`; InvalidArgument
// where `out` would grow past `most` bytes.
void append_replaced(std::string_view text, std::string_view pattern, std::string_view content,
                     std::string& out, std::size_t most = std::string::npos);

}  // namespace shardwise::text::detail

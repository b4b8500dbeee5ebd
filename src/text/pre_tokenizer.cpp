#include "detail/pre_tokenizer.hpp"

#include <utility>

#include "detail/byte_level.hpp"
#include "detail/unicode_classes.hpp"
#include "detail/utf8.hpp"

namespace shardwise::text::detail {
namespace {

void split_byte_level(const ByteLevelStep& step, std::string piece, std::vector<std::string>& out) {
  if (step.add_prefix_space && piece.front() != ' ') piece.insert(piece.begin(), ' ');
  std::vector<std::string> parts;
  if (step.use_regex) {
    split_isolated(SplitPattern::kGpt2, piece, parts);
  } else {
    parts.push_back(std::move(piece));
  }
  for (const std::string& part : parts) out.push_back(byte_level_spelling(part));
}

// Numerics one a piece (individual), or each run of numerics and each run of anything else a
// piece.
void split_digits(const DigitsStep& step, const std::string& piece, std::vector<std::string>& out) {
  std::size_t start = 0;
  bool run_is_numeric = false;
  for (std::size_t at = 0; at < piece.size();) {
    const std::size_t length = utf8_length(piece, at);
    const bool numeric = is_numeric(utf8_decode(piece, at, length));
    if (at > start && (numeric != run_is_numeric || (numeric && step.individual_digits))) {
      out.push_back(piece.substr(start, at - start));
      start = at;
    }
    run_is_numeric = numeric;
    at += length;
  }
  if (start < piece.size()) out.push_back(piece.substr(start));
}

}  // namespace

std::vector<std::string> pre_tokenize(const std::vector<PreTokenizerStep>& steps,
                                      std::string_view text) {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  for (const PreTokenizerStep& step : steps) {
    std::vector<std::string> next;
    next.reserve(pieces.size());
    for (std::string& piece : pieces) {
      if (const auto* byte_level = std::get_if<ByteLevelStep>(&step)) {
        split_byte_level(*byte_level, std::move(piece), next);
      } else if (const auto* split = std::get_if<SplitStep>(&step)) {
        split_isolated(split->pattern, piece, next);
      } else {
        split_digits(std::get<DigitsStep>(step), piece, next);
      }
    }
    std::erase_if(next, [](const std::string& piece) { return piece.empty(); });
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace shardwise::text::detail

#include "detail/pre_tokenizer.hpp"

#include <utility>

#include "detail/byte_level.hpp"
#include "detail/normalizer.hpp"
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

// Spaces respelt, the replacement prepended as the scheme says (`first_piece`: the piece starts
// the text), then with `split` a piece cut before each replacement.
void split_metaspace(const MetaspaceStep& step, const std::string& piece, bool first_piece,
                     std::vector<std::string>& out) {
  std::string text;
  const bool prepend = step.prepend_scheme == PrependScheme::kAlways ||
                       (step.prepend_scheme == PrependScheme::kFirst && first_piece);
  if (prepend && !piece.starts_with(' ') && !piece.starts_with(step.replacement)) {
    text = step.replacement;
  }
  append_replaced(piece, " ", step.replacement, text);
  if (!step.split) {
    out.push_back(std::move(text));
    return;
  }
  std::size_t start = 0;
  for (std::size_t at = text.find(step.replacement, 1); at != std::string::npos;
       at = text.find(step.replacement, at + step.replacement.size())) {
    out.push_back(text.substr(start, at - start));
    start = at;
  }
  out.push_back(text.substr(start));
}

}  // namespace

std::vector<std::string> pre_tokenize(const std::vector<PreTokenizerStep>& steps,
                                      std::string_view text, bool starts_text) {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  for (const PreTokenizerStep& step : steps) {
    std::vector<std::string> next;
    next.reserve(pieces.size());
    // Steps drop no text, so the first piece starts where `text` does.
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      std::string& piece = pieces[i];
      if (const auto* byte_level = std::get_if<ByteLevelStep>(&step)) {
        split_byte_level(*byte_level, std::move(piece), next);
      } else if (const auto* split = std::get_if<SplitStep>(&step)) {
        split_isolated(split->pattern, piece, next);
      } else if (const auto* digits = std::get_if<DigitsStep>(&step)) {
        split_digits(*digits, piece, next);
      } else {
        split_metaspace(std::get<MetaspaceStep>(step), piece, starts_text && i == 0, next);
      }
    }
    std::erase_if(next, [](const std::string& piece) { return piece.empty(); });
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace shardwise::text::detail

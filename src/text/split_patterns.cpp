#include "detail/split_patterns.hpp"

#include <cstddef>
#include <limits>

#include "detail/unicode_classes.hpp"
#include "detail/utf8.hpp"

namespace shardwise::text::detail {
namespace {

constexpr std::string_view kGpt2Text =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Text =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_other(char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }
bool is_line_break(char32_t c) { return c == '\r' || c == '\n'; }

// A match's length in code points from position `at` of `text`, 0 where none starts there.
class Scanner {
 public:
  explicit Scanner(const std::vector<char32_t>& text) : text_(text) {}

  [[nodiscard]] std::size_t gpt2(std::size_t at) const {
    if (const std::size_t n = contraction(at, false)) return n;
    for (bool (*in_class)(char32_t) : {is_letter, is_number, is_other}) {
      if (const std::size_t n = optional_space_then_run(at, in_class)) return n;
    }
    return trailing_spaces(at);
  }

  [[nodiscard]] std::size_t llama3(std::size_t at) const {
    if (const std::size_t n = contraction(at, true)) return n;
    const char32_t c = text_[at];
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (is_letter(c)) return run(at, is_letter);
    if (!is_line_break(c) && !is_number(c) && at + 1 < text_.size() && is_letter(text_[at + 1])) {
      return 1 + run(at + 1, is_letter);
    }
    // \p{N}{1,3}: three at most, so a run of digits is measured three at a time (measured
    // whole at each place, 512 KiB of digits took minutes)
    if (is_number(c)) return run(at, is_number, 3);
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    if (const std::size_t n = optional_space_then_run(at, is_other)) {
      return n + run(at + n, is_line_break);
    }
    // \s*[\r\n]+: the spaces up to the run's last line break, backtracking from its end.
    const std::size_t spaces = run(at, is_space);
    for (std::size_t n = spaces; n > 0; --n) {
      if (is_line_break(text_[at + n - 1])) return n;
    }
    return trailing_spaces(at);
  }

 private:
  // How many code points from `at` are in the class, `most` at most. A run measured is taken by
  // the match (or, for \s*[\r\n]+, what follows its last line break by the next match or two),
  // so each code point is measured a few times at most and a scan is linear in the text.
  [[nodiscard]] std::size_t run(std::size_t at, bool (*in_class)(char32_t),
                                std::size_t most = std::numeric_limits<std::size_t>::max()) const {
    const std::size_t last = text_.size() - at < most ? text_.size() : at + most;
    std::size_t end = at;
    while (end < last && in_class(text_[end])) ++end;
    return end - at;
  }

  // ' ?X+': a space, then X's, where an X follows the space; else X's from `at`.
  [[nodiscard]] std::size_t optional_space_then_run(std::size_t at,
                                                    bool (*in_class)(char32_t)) const {
    if (text_[at] == ' ' && at + 1 < text_.size() && in_class(text_[at + 1])) {
      return 1 + run(at + 1, in_class);
    }
    return run(at, in_class);
  }

  // \s+(?!\S)|\s+: a run of spaces, less its last where a non-space follows it (that one is
  // left to start the next piece, " word"), the single space where the run is one.
  [[nodiscard]] std::size_t trailing_spaces(std::size_t at) const {
    const std::size_t n = run(at, is_space);
    if (n == 0 || at + n == text_.size()) return n;
    return n >= 2 ? n - 1 : 1;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, case-insensitive for Llama 3 (Unicode case folding: 'S', and
  // U+017F LATIN SMALL LETTER LONG S folds to 's'; no other character folds to these letters,
  // tests/text/make_unicode_tables.py checks on the library).
  [[nodiscard]] std::size_t contraction(std::size_t at, bool ignore_case) const {
    if (text_[at] != '\'' || at + 1 >= text_.size()) return 0;
    const auto letter = [&](std::size_t i) -> char32_t {
      if (i >= text_.size()) return 0;
      const char32_t c = text_[i];
      if (!ignore_case) return c;
      if (c >= 'A' && c <= 'Z') return c - 'A' + 'a';
      return c == 0x17f ? U's' : c;
    };
    const char32_t first = letter(at + 1);
    if (first == 's' || first == 't' || first == 'm' || first == 'd') return 2;
    const char32_t second = letter(at + 2);
    if ((first == 'r' && second == 'e') || (first == 'v' && second == 'e') ||
        (first == 'l' && second == 'l')) {
      return 3;
    }
    return 0;
  }

  const std::vector<char32_t>& text_;
};

}  // namespace

std::string_view split_pattern_text(SplitPattern pattern) {
  return pattern == SplitPattern::kGpt2 ? kGpt2Text : kLlama3Text;
}

std::optional<SplitPattern> known_split_pattern(std::string_view regex) {
  if (regex == kGpt2Text) return SplitPattern::kGpt2;
  if (regex == kLlama3Text) return SplitPattern::kLlama3;
  return std::nullopt;
}

void split_isolated(SplitPattern pattern, std::string_view text, std::vector<std::string>& out) {
  const CodePoints points = code_points(text);
  const Scanner scanner(points.values);
  const auto piece = [&](std::size_t from, std::size_t to) {
    out.emplace_back(text.substr(points.offsets[from], points.offsets[to] - points.offsets[from]));
  };
  std::size_t unmatched = 0;  // where the run since the last match began
  std::size_t at = 0;
  while (at < points.values.size()) {
    const std::size_t n = pattern == SplitPattern::kGpt2 ? scanner.gpt2(at) : scanner.llama3(at);
    if (n == 0) {
      ++at;
      continue;
    }
    if (unmatched < at) piece(unmatched, at);
    piece(at, at + n);
    at += n;
    unmatched = at;
  }
  if (unmatched < points.values.size()) piece(unmatched, points.values.size());
}

}  // namespace shardwise::text::detail

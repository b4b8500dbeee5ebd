#include "detail/unicode_classes.hpp"

#include <algorithm>
#include <array>
#include <iterator>

namespace shardwise::text::detail {
namespace {

// A class's ranges, with its ASCII members looked up directly: most text is ASCII, and each
// character of it is classified several times.
class CharacterClass {
 public:
  explicit CharacterClass(std::span<const CodePointRange> ranges) : ranges_(ranges) {
    for (char32_t c = 0; c < ascii_.size(); ++c) ascii_[c] = in_ranges(c);
  }
  [[nodiscard]] bool contains(char32_t c) const {
    return c < ascii_.size() ? ascii_[c] : in_ranges(c);
  }

 private:
  [[nodiscard]] bool in_ranges(char32_t c) const {
    const auto after = std::upper_bound(
        ranges_.begin(), ranges_.end(), c,
        [](char32_t value, const CodePointRange& range) { return value < range.first; });
    return after != ranges_.begin() && c <= std::prev(after)->last;
  }
  std::span<const CodePointRange> ranges_;
  std::array<bool, 128> ascii_{};
};

}  // namespace

bool is_letter(char32_t c) {
  static const CharacterClass letters(regex_letters());
  return letters.contains(c);
}

bool is_number(char32_t c) {
  static const CharacterClass numbers(regex_numbers());
  return numbers.contains(c);
}

bool is_space(char32_t c) {
  static const CharacterClass spaces(regex_spaces());
  return spaces.contains(c);
}

bool is_numeric(char32_t c) {
  static const CharacterClass numerics(digits_numerics());
  return numerics.contains(c);
}

bool is_added_token_word_character(char32_t c) {
  static const CharacterClass word_characters(added_token_word_characters());
  return word_characters.contains(c);
}

bool is_added_token_space(char32_t c) {
  static const CharacterClass spaces(added_token_spaces());
  return spaces.contains(c);
}

}  // namespace shardwise::text::detail

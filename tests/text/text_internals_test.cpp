// The tokenizer's pieces on their own: UTF-8 made text as Rust's from_utf8_lossy makes it, the
// byte-level alphabet, the split patterns' scanners, the character classes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/detail/byte_level.hpp"
#include "text/detail/split_patterns.hpp"
#include "text/detail/unicode_classes.hpp"
#include "text/detail/utf8.hpp"

namespace shardwise::text::detail {
namespace {

using ::testing::ElementsAre;

const std::string kReplacement = "\xef\xbf\xbd";

TEST(Utf8Lossy, ReplacesEachMaximalInvalidRunOnceAsRustDoes) {
  EXPECT_EQ(utf8_lossy("plain é 😀"), "plain é 😀");
  EXPECT_EQ(utf8_lossy("\xe2\x82"
                       "A"),
            kReplacement + "A");  // a cut sequence is one
  EXPECT_EQ(utf8_lossy("\xf0\x9f\x98"), kReplacement);
  EXPECT_EQ(utf8_lossy("\xed\xa0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(utf8_lossy("\xc0\xaf"), kReplacement + kReplacement);                     // overlong
  EXPECT_EQ(utf8_lossy("\xff"
                       "a\x80"),
            kReplacement + "a" + kReplacement);
  // Past U+10FFFF: the lead byte cannot start one, and each byte after it is stray.
  EXPECT_EQ(utf8_lossy("\xf4\x90\x80\x80"),
            kReplacement + kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(utf8_lossy(""), "");
}

TEST(Utf8, DecodesAndEncodesEveryCodePoint) {
  for (char32_t c = 0; c < 0x110000; c += (c < 0x800 ? 1 : 37)) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    std::string text;
    append_utf8(text, c);
    ASSERT_EQ(utf8_length(text, 0), text.size());
    ASSERT_EQ(utf8_decode(text, 0, text.size()), c);
  }
}

TEST(ByteLevelAlphabet, StandsEachByteForOneCharacterAndBack) {
  EXPECT_EQ(byte_character(' '), U'\u0120');
  EXPECT_EQ(byte_character('\n'), U'\u010a');
  EXPECT_EQ(byte_character('a'), U'a');
  EXPECT_EQ(byte_character(0xad), U'\u0143');
  for (int byte = 0; byte < 256; ++byte) {
    const auto b = static_cast<unsigned char>(byte);
    EXPECT_EQ(character_byte(byte_character(b)), b);
  }
  EXPECT_EQ(character_byte(U' '), std::nullopt);
  EXPECT_EQ(character_byte(U'\u0144'), std::nullopt);
  std::string bytes;
  append_token_bytes("\xc4\xa0hi", bytes);  // "Ġhi"
  append_token_bytes("<a b>", bytes);       // a space is not in the alphabet: kept as it is
  EXPECT_EQ(bytes, " hi<a b>");
}

std::vector<std::string> split(SplitPattern pattern, std::string_view text) {
  std::vector<std::string> pieces;
  split_isolated(pattern, text, pieces);
  return pieces;
}

TEST(SplitPatterns, Gpt2KeepsASpaceWithTheWordAfterIt) {
  EXPECT_THAT(split(SplitPattern::kGpt2, "Hello world  it's 123!!"),
              ElementsAre("Hello", " world", " ", " it", "'s", " 123", "!!"));
  EXPECT_THAT(split(SplitPattern::kGpt2, "end   "), ElementsAre("end", "   "));
  EXPECT_THAT(split(SplitPattern::kGpt2, "IT'S"), ElementsAre("IT", "'", "S"));
  EXPECT_THAT(split(SplitPattern::kGpt2, "a\n\nb"), ElementsAre("a", "\n", "\n", "b"));
  EXPECT_TRUE(split(SplitPattern::kGpt2, "").empty());
}

TEST(SplitPatterns, Llama3GroupsDigitsByThreeAndLineBreaks) {
  EXPECT_THAT(split(SplitPattern::kLlama3, "1234567 IT'S (x)\n\n  y"),
              ElementsAre("123", "456", "7", " IT", "'S", " (", "x", ")\n\n", " ", " y"));
  EXPECT_THAT(split(SplitPattern::kLlama3, "a \n \n b"), ElementsAre("a", " \n \n", " b"));
  EXPECT_THAT(split(SplitPattern::kLlama3, "'\u017f"), ElementsAre("'\u017f"));
}

TEST(SplitPatterns, AreRecognisedByTheirExactText) {
  EXPECT_EQ(known_split_pattern(split_pattern_text(SplitPattern::kGpt2)), SplitPattern::kGpt2);
  EXPECT_EQ(known_split_pattern(split_pattern_text(SplitPattern::kLlama3)), SplitPattern::kLlama3);
  EXPECT_EQ(known_split_pattern("\\s+"), std::nullopt);
  EXPECT_EQ(known_split_pattern(std::string(split_pattern_text(SplitPattern::kGpt2)) + " "),
            std::nullopt);
}

TEST(CharacterClasses, AreTheLibrarysUnicode) {
  EXPECT_TRUE(is_letter(U'a'));
  EXPECT_TRUE(is_letter(U'\u4e00'));
  EXPECT_TRUE(is_letter(U'\U0002ebf0'));  // CJK Extension I (Unicode 15.1): past ICU 72's
  EXPECT_FALSE(is_letter(U'1'));
  EXPECT_TRUE(is_number(U'\u0663'));
  EXPECT_TRUE(is_number(U'\u00bd'));
  EXPECT_TRUE(is_space(U'\u3000'));
  EXPECT_TRUE(is_space(U'\u0085'));
  EXPECT_FALSE(is_space(U'\u200b'));
  EXPECT_TRUE(is_numeric(U'\U00016d70'));  // Kirat Rai digit zero (Unicode 16.0)
  EXPECT_TRUE(is_added_token_word_character(U'_'));
  EXPECT_FALSE(is_added_token_word_character(U'-'));
  EXPECT_TRUE(is_added_token_space(U'\t'));
  for (const auto ranges : {regex_letters(), regex_numbers(), regex_spaces(), digits_numerics(),
                            added_token_word_characters(), added_token_spaces()}) {
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      ASSERT_LE(ranges[i].first, ranges[i].last);
      if (i > 0) {
        ASSERT_LT(ranges[i - 1].last + 1, ranges[i].first);
      }
    }
  }
}

}  // namespace
}  // namespace shardwise::text::detail

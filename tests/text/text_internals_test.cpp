// The tokenizer's pieces on their own: UTF-8 made text as Rust's from_utf8_lossy makes it, the
// byte-level alphabet, the split patterns' scanners, the character classes, the merge loop, the
// normalizer's and Metaspace's steps, the decoders.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "text/detail/bpe_merge.hpp"
#include "text/detail/byte_level.hpp"
#include "text/detail/decoder.hpp"
#include "text/detail/normalizer.hpp"
#include "text/detail/pre_tokenizer.hpp"
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

// The merge loop against its definition, merged step by step: the lowest-ranked pair anywhere,
// the leftmost among equals, until none has a merge. Words short and long (long ones take their
// candidates from lists per rank), on random merges whose results are all distinct ids.
std::vector<std::int32_t> merged_step_by_step(std::vector<std::int32_t> ids,
                                              const MergeRanks& ranks) {
  for (;;) {
    std::size_t best = ids.size();
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const auto it = ranks.find(pair_key(ids[i], ids[i + 1]));
      if (it == ranks.end()) continue;
      if (best == ids.size() ||
          it->second.rank < ranks.at(pair_key(ids[best], ids[best + 1])).rank) {
        best = i;
      }
    }
    if (best == ids.size()) return ids;
    ids[best] = ranks.at(pair_key(ids[best], ids[best + 1])).merged;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

TEST(MergeSymbols, MergesAsTheDefinitionOnShortAndLongWords) {
  std::mt19937 random(7);
  for (int round = 0; round < 40; ++round) {
    MergeRanks ranks;
    std::int32_t next_id = 4;  // ids 0-3 are the word's letters
    for (std::uint32_t rank = 0; rank < 60; ++rank) {
      const auto left = static_cast<std::int32_t>(random() % static_cast<unsigned>(next_id));
      const auto right = static_cast<std::int32_t>(random() % static_cast<unsigned>(next_id));
      if (ranks.emplace(pair_key(left, right), MergeRank{rank, next_id}).second) ++next_id;
    }
    const std::size_t length = round % 2 == 0 ? 1 + random() % 40 : 500 + random() % 3000;
    std::vector<std::int32_t> ids(length);
    std::vector<Symbol> symbols;
    for (std::size_t i = 0; i < length; ++i) {
      ids[i] = static_cast<std::int32_t>(random() % 4);
      const auto index = static_cast<std::uint32_t>(i);
      symbols.push_back(
          {ids[i], i == 0 ? kNoSymbol : index - 1, i + 1 == length ? kNoSymbol : index + 1, 1});
    }
    merge_symbols(symbols, ranks);
    std::vector<std::int32_t> merged;
    for (const Symbol& symbol : symbols) {
      if (symbol.length != 0) merged.push_back(symbol.id);
    }
    ASSERT_EQ(merged, merged_step_by_step(ids, ranks)) << "round " << round;
  }
}

TEST(Normalizer, PrependsToTextAndReplacesLeftmostMatchesWithoutOverlap) {
  const std::vector<NormalizerStep> llama = {PrependStep{"\u2581"}, ReplaceStep{" ", "\u2581"}};
  EXPECT_EQ(normalize(llama, "a b"), "\u2581a\u2581b");
  EXPECT_EQ(normalize(llama, " "), "\u2581\u2581");
  EXPECT_EQ(normalize(llama, ""), "");  // nothing is prepended to nothing
  EXPECT_EQ(normalize({ReplaceStep{"aa", "X"}}, "aaaaa"), "XXa");
  EXPECT_EQ(normalize({ReplaceStep{"x", ""}, PrependStep{">"}}, "xx"), "");
  EXPECT_EQ(normalize({}, "as is"), "as is");
}

std::vector<std::string> metaspace_pieces(PrependScheme scheme, bool split, std::string_view text,
                                          bool starts_text = true) {
  return pre_tokenize({MetaspaceStep{"\u2581", scheme, split}}, text, starts_text);
}

TEST(Metaspace, RespellsSpacesPrependsAsTheSchemeSaysAndSplitsBeforeEachReplacement) {
  EXPECT_THAT(metaspace_pieces(PrependScheme::kAlways, true, "a  b"),
              ElementsAre("\u2581a", "\u2581", "\u2581b"));
  EXPECT_THAT(metaspace_pieces(PrependScheme::kAlways, true, "ab\u2581"),
              ElementsAre("\u2581ab", "\u2581"));
  EXPECT_THAT(metaspace_pieces(PrependScheme::kFirst, false, "a b"), ElementsAre("\u2581a\u2581b"));
  EXPECT_THAT(metaspace_pieces(PrependScheme::kFirst, false, "a b", false),
              ElementsAre("a\u2581b"));
  EXPECT_THAT(metaspace_pieces(PrependScheme::kNever, false, " a"), ElementsAre("\u2581a"));
  EXPECT_THAT(metaspace_pieces(PrependScheme::kAlways, false, "\u2581a"), ElementsAre("\u2581a"));
  EXPECT_TRUE(metaspace_pieces(PrependScheme::kAlways, true, "").empty());
  EXPECT_THAT(metaspace_pieces(PrependScheme::kAlways, false, "\t"), ElementsAre("\u2581\t"));
}

std::string decoded(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens) {
  return decode_tokens(steps, std::move(tokens));
}

TEST(Decoders, ReadByteTokensAsTheLibraryAndStripAndSpellSpaces) {
  const std::vector<DecoderStep> bytes = {ByteFallbackDecoder{}, FuseDecoder{}};
  EXPECT_EQ(decoded(bytes, {"<0xE2>", "<0x82>", "<0xAC>", "x"}), "\u20acx");
  EXPECT_EQ(decoded(bytes, {"<0xE2>", "<0x82>", "x", "<0xAC>"}),
            kReplacement + kReplacement + "x" + kReplacement);
  EXPECT_EQ(decoded(bytes, {"<0x61>", "<0x+9>", "<0x0a>"}), "a\t\n");  // u8::from_str_radix
  EXPECT_EQ(decoded(bytes, {"<0xG1>", "<0x1>", "<0x100>"}), "<0xG1><0x1><0x100>");
  const std::vector<DecoderStep> strip = {StripDecoder{U' ', 2}};
  EXPECT_EQ(decoded(strip, {"   a", " b", "c "}), " abc ");
  const std::vector<DecoderStep> metaspace = {MetaspaceDecoder{"\u2581", true}};
  EXPECT_EQ(decoded(metaspace, {"\u2581a\u2581", "\u2581b"}), "a b");
  const std::vector<DecoderStep> never = {MetaspaceDecoder{"\u2581", false}};
  EXPECT_EQ(decoded(never, {"\u2581a", "\u2581b"}), " a b");
  EXPECT_EQ(decoded({ReplaceDecoder{"\u2581", " "}, ByteLevelDecoder{}}, {"\u2581x", "\u0120y"}),
            " x y");
}

}  // namespace
}  // namespace shardwise::text::detail

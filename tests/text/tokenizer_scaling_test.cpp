// Encoding is linear in the text: 8 MiB of one kind of character (digits, spaces, line breaks,
// punctuation, letters, apostrophes, "▁") under every fixture's tokenizer, each a run the
// pre-tokenizer's expression scans or the model merges as one word. (Llama 3's \p{N}{1,3}
// measured the whole run of digits at every place: 512 KiB took 80 s, these would take hours.)
// CTest runs them under a timeout; a cost quadratic in a run's length fails there. The ids are
// held to what the pipeline makes of the text: pieces of a known size where the pre-tokenizer
// bounds them, and the text back from decoding where the vocabulary spells every byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {
namespace {

const std::string kFixtures = SHARDWISE_SOURCE_DIR "/tests/text/fixtures/";
constexpr std::size_t kBytes = std::size_t{8} << 20;

struct RunKind {
  const char* name;
  std::string unit;  // repeated to kBytes
};

const std::vector<RunKind>& runs() {
  static const std::vector<RunKind> all = {
      {"digits", "123"},    {"spaces", " "},  {"line_breaks", "\n"}, {"spaced_lines", " \n"},
      {"punctuation", "!"}, {"letters", "a"}, {"apostrophes", "'"},  {"metaspace", "\u2581"},
  };
  return all;
}

std::string repeated(const std::string& unit, std::size_t bytes) {
  std::string text;
  text.reserve(bytes);
  while (text.size() + unit.size() <= bytes) text += unit;
  return text;
}

// The fixtures whose vocabulary spells every byte and whose decoder gives the text back: the
// byte-level ones without a prefix space ("added" prepends one), and the SentencePiece-style
// ones decoding byte tokens (ByteFallback) a text without "▁" (which they decode as a space);
// for "spm" only a text that does not start with a space: its decoder strips the one it
// prepends, and one the text began with alike.
bool decodes_back(const std::string& fixture, const std::string& text) {
  for (const char* name : {"gpt2", "llama3", "smollm2", "empty_affixes"}) {
    if (fixture == name) return true;
  }
  if (text.find("\u2581") != std::string::npos) return false;
  for (const char* name : {"spm_legacy", "spm_legacy_added", "metaspace_never"}) {
    if (fixture == name) return true;
  }
  return fixture == "spm" && !text.starts_with(' ');
}

std::vector<std::int32_t> repeated_ids(const std::vector<std::int32_t>& unit, std::size_t times) {
  std::vector<std::int32_t> ids;
  ids.reserve(unit.size() * times);
  for (std::size_t i = 0; i < times; ++i) ids.insert(ids.end(), unit.begin(), unit.end());
  return ids;
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  const std::string suffix = ".tokenizer.json";
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures)) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(suffix)) names.push_back(file.substr(0, file.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

class LongRun : public ::testing::TestWithParam<std::tuple<std::string, std::size_t>> {
 protected:
  const std::string fixture = std::get<0>(GetParam());
  const RunKind& run = runs()[std::get<1>(GetParam())];
  const Tokenizer tokenizer = Tokenizer::from_file(kFixtures + fixture + ".tokenizer.json");
  const std::string text = repeated(run.unit, kBytes);
};

TEST_P(LongRun, EncodesInLinearTimeAndDecodesBack) {
  const std::vector<std::int32_t> ids = tokenizer.encode(text, false);
  EXPECT_LE(ids.size(), 2 * text.size());  // a character's bytes and an unknown id at most
  if (decodes_back(fixture, text)) {
    EXPECT_TRUE(tokenizer.decode(ids) == text) << "decoding does not give the text back";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFixture, LongRun,
                         ::testing::Combine(::testing::ValuesIn(fixture_names()),
                                            ::testing::Range(std::size_t{0}, runs().size())),
                         [](const ::testing::TestParamInfo<LongRun::ParamType>& param) {
                           return std::get<0>(param.param) + "_" +
                                  runs()[std::get<1>(param.param)].name;
                         });

// Where the pre-tokenizer bounds the pieces, 8 MiB of one unit is its pieces' ids over and over:
// Llama 3's expression takes digits three at a time, SmolLM2's Digits one at a time, and
// Metaspace with split makes each "▁" a piece.
TEST(LongRuns, OfDigitsAreTakenThreeAtATimeUnderLlama3sExpression) {
  const Tokenizer llama = Tokenizer::from_file(kFixtures + "llama3.tokenizer.json");
  const std::string text = repeated("123", kBytes - 1) + "12";  // 8 MiB: 2796202 × "123", "12"
  ASSERT_EQ(text.size(), kBytes);
  std::vector<std::int32_t> expected = repeated_ids(llama.encode("123", false), kBytes / 3);
  const std::vector<std::int32_t> tail = llama.encode("12", false);
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_TRUE(llama.encode(text, false) == expected);
}

TEST(LongRuns, OfDigitsAreTakenOneAtATimeUnderIndividualDigits) {
  const Tokenizer smollm = Tokenizer::from_file(kFixtures + "smollm2.tokenizer.json");
  const std::vector<std::int32_t> unit = smollm.encode("123", false);
  ASSERT_EQ(unit.size(), 3U);
  EXPECT_TRUE(smollm.encode(repeated("123", kBytes), false) == repeated_ids(unit, kBytes / 3));
}

TEST(LongRuns, OfSpacesAreOneMetaspaceAPieceWithSplit) {
  const Tokenizer split = Tokenizer::from_file(kFixtures + "metaspace_always_split.tokenizer.json");
  const std::vector<std::int32_t> unit = split.encode(" ", false);
  ASSERT_EQ(unit, std::vector<std::int32_t>{*split.token_to_id("\u2581")});
  EXPECT_TRUE(split.encode(std::string(kBytes, ' '), false) == repeated_ids(unit, kBytes));
}

// A SentencePiece-style tokenizer merges the whole text as one word (no pre-tokenizer splits
// it): 4 MiB of lines joined by spaces is merged in O(n log n). SentencePiece's pieces hold "▁"
// at their start alone, so no merge joins one line's last character to the "▁" the next starts
// with: the ids are one line's (whose "▁" the normalizer prepends) over and over.
TEST(LongRuns, OfProseAreOneWordForSentencePieceAndMergeAsTheirLines) {
  const Tokenizer legacy = Tokenizer::from_file(kFixtures + "spm_legacy.tokenizer.json");
  const std::string line = "the licence of this software, with its 3 terms and conditions;";
  const std::size_t lines = (std::size_t{4} << 20) / (line.size() + 1);
  std::string text = line;
  for (std::size_t i = 1; i < lines; ++i) text += " " + line;
  const std::vector<std::int32_t> unit = legacy.encode(line, false);
  ASSERT_LT(unit.size(), line.size() / 2) << "the line is merged, not left in characters";
  const std::vector<std::int32_t> ids = legacy.encode(text, false);
  EXPECT_TRUE(ids == repeated_ids(unit, lines));
  EXPECT_TRUE(legacy.decode(ids) == text);
}

}  // namespace
}  // namespace shardwise::text

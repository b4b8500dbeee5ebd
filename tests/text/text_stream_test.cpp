// A text encoded as it streams, chunk by chunk on several threads, gives the ids of the whole
// text encoded at once, for every fixture tokenizer (cuts placed by Tokenizer::last_cut), and
// refuses what it cannot read by name.

#include "shardwise/text/text_stream.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"
#include "test_files.hpp"

namespace shardwise::text {
namespace {

using shardwise::testing::error_of;
using shardwise::testing::test_path;
using ::testing::HasSubstr;

const std::string kFixtures = SHARDWISE_SOURCE_DIR "/tests/text/fixtures/";

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = test_path(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

// Words, spaces of every kind, line breaks, digits, punctuation, contractions, letters outside
// ASCII and the fixtures' special tokens, so that chunks end next to each of them.
std::string random_text(std::mt19937& rng, std::size_t pieces) {
  static const std::vector<std::string> kParts = {"the",
                                                  "The",
                                                  "license",
                                                  "GNU",
                                                  "software",
                                                  "a",
                                                  "I",
                                                  "x",
                                                  " ",
                                                  "  ",
                                                  "   ",
                                                  "\n",
                                                  "\n\n",
                                                  "\r\n",
                                                  "\t",
                                                  " \n",
                                                  "\n ",
                                                  ".",
                                                  ",",
                                                  "!?",
                                                  "'s",
                                                  "'ll",
                                                  "'T",
                                                  "123",
                                                  "4567",
                                                  "3.14",
                                                  "naïve",
                                                  "café",
                                                  "日本",
                                                  "данные",
                                                  "😀",
                                                  "\u00a0",
                                                  "\u3000",
                                                  "(",
                                                  "\"",
                                                  "-",
                                                  "<|endoftext|>",
                                                  "<|im_start|>",
                                                  "<|im_end|>",
                                                  "<|begin_of_text|>",
                                                  "<sep>",
                                                  "hello",
                                                  "wor",
                                                  "world",
                                                  "ab",
                                                  "the",
                                                  " lic",
                                                  "A\nb",
                                                  "z\nZ",
                                                  ". Next",
                                                  "word word"};
  std::uniform_int_distribution<std::size_t> pick(0, kParts.size() - 1);
  std::string text;
  for (std::size_t i = 0; i < pieces; ++i) text += kParts[pick(rng)];
  return text;
}

std::vector<std::int32_t> streamed(const Tokenizer& tokenizer, const std::string& path,
                                   StreamOptions options) {
  std::vector<std::int32_t> ids;
  encode_file(tokenizer, path, "the text", options, [&](std::span<const std::int32_t> block) {
    ids.insert(ids.end(), block.begin(), block.end());
    return true;
  });
  return ids;
}

class StreamedFixture : public ::testing::TestWithParam<std::string> {
 protected:
  Tokenizer tokenizer = Tokenizer::from_file(kFixtures + GetParam() + ".tokenizer.json");
};

// Chunks of 7 to 200 bytes over a thousand texts: every cut the tokenizer allows is taken, and
// the ids are the whole text's, with and without the special tokens.
TEST_P(StreamedFixture, EncodesAsTheWholeText) {
  std::mt19937 rng(20261206);
  std::size_t cut_texts = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string text = random_text(rng, 5 + static_cast<std::size_t>(round % 120));
    const std::string path = temp_file("stream.txt", text);
    for (const bool special : {true, false}) {
      StreamOptions options;
      options.add_special_tokens = special;
      options.chunk_bytes = 7 + static_cast<std::size_t>(round * 13 % 194);
      options.threads = 1 + round % 3;
      EXPECT_EQ(streamed(tokenizer, path, options), tokenizer.encode(text, special))
          << GetParam() << " chunks of " << options.chunk_bytes << ": " << echo_input(text, 400);
    }
    cut_texts += tokenizer.last_cut(text) != 0 ? 1 : 0;
  }
  // The byte-level fixtures without a prefix space or added tokens holding spaces are cut, and
  // the SentencePiece-style ones (normalizer or Metaspace) whose added tokens end with no letter
  // (spm_legacy_added's do).
  if (GetParam() == "gpt2" || GetParam() == "llama3" || GetParam() == "smollm2" ||
      GetParam() == "spm" || GetParam() == "spm_legacy" || GetParam() == "metaspace" ||
      GetParam() == "metaspace_always_split" || GetParam() == "metaspace_never" ||
      GetParam() == "spm_legacy_normalized_specials") {
    EXPECT_GT(cut_texts, 200U) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StreamedFixture,
                         ::testing::Values("gpt2", "llama3", "smollm2", "added", "handmade_bare",
                                           "handmade_fuse_unk", "handmade_ignore_merges", "spm",
                                           "spm_legacy", "spm_legacy_added",
                                           "spm_legacy_normalized_specials", "metaspace",
                                           "metaspace_always_split", "metaspace_never"));

TEST(TextStream, CutsWhereThePipelineSplitsAnyway) {
  const Tokenizer gpt2 = Tokenizer::from_file(kFixtures + "gpt2.tokenizer.json");
  EXPECT_EQ(gpt2.last_cut("one.\nTwo"), 5U);   // after a line break, before a letter
  EXPECT_EQ(gpt2.last_cut("one two"), 3U);     // a space between letters
  EXPECT_EQ(gpt2.last_cut("one  \nTwo"), 0U);  // spaces before the line break join it
  EXPECT_EQ(gpt2.last_cut("12 34"), 0U);       // not between letters
  EXPECT_EQ(gpt2.last_cut("abc"), 0U);
  // The `added` fixture has tokens holding a space: no cut is known to be exact.
  const Tokenizer added = Tokenizer::from_file(kFixtures + "added.tokenizer.json");
  EXPECT_EQ(added.last_cut("one two\nThree"), 0U);
}

// SentencePiece-style BPE (Llama 2's, TinyLlama's, Mistral's) cuts at a space between letters,
// the piece after it continuing the text without a second "▁" before it; a vocabulary with a
// token holding "▁" after a letter, whose merges could join the two sides, is never cut.
TEST(TextStream, SentencePieceCutsBeforeASpaceBetweenLetters) {
  for (const char* name : {"spm_legacy", "metaspace", "metaspace_never"}) {
    const Tokenizer spm = Tokenizer::from_file(kFixtures + name + ".tokenizer.json");
    EXPECT_TRUE(spm.cuts_text()) << name;
    EXPECT_EQ(spm.last_cut("one two"), 3U) << name;
    EXPECT_EQ(spm.last_cut("one  two"), 0U) << name;  // the mark after a mark may merge
    EXPECT_EQ(spm.last_cut("12 34"), 0U) << name;
    std::vector<std::int32_t> joined = spm.encode("one", false);
    const std::vector<std::int32_t> rest = spm.encode_continuing(" two three");
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, spm.encode("one two three", false)) << name;
    if (std::string(name) == "spm_legacy") {  // its Prepend marks a text's start; Metaspace's
      EXPECT_NE(spm.encode(" two three", false), rest) << "the start's mark left out";
    }
  }
  std::ifstream in(kFixtures + "spm_legacy.tokenizer.json");
  nlohmann::json file = nlohmann::json::parse(in);
  file["model"]["vocab"]["e\u2581t"] = file["model"]["vocab"].size();
  const Tokenizer joining = Tokenizer::from_json(file.dump(), "a vocabulary joining spaces");
  EXPECT_FALSE(joining.cuts_text());
  EXPECT_EQ(joining.last_cut("one two"), 0U);
  // ignore_merges takes a piece that is a token whole: the piece after a cut (" zq") could be
  // one where the whole text's one word is merged.
  std::ifstream again(kFixtures + "spm_legacy.tokenizer.json");
  nlohmann::json whole_words = nlohmann::json::parse(again);
  whole_words["model"]["ignore_merges"] = true;
  EXPECT_FALSE(Tokenizer::from_json(whole_words.dump(), "ignore_merges").cuts_text());
  // An added token holding "▁" past its start matches the text's spaces across a cut.
  std::ifstream third(kFixtures + "spm_legacy.tokenizer.json");
  nlohmann::json spanning = nlohmann::json::parse(third);
  spanning["added_tokens"].push_back({{"id", spanning["model"]["vocab"].size()},
                                      {"content", "o\u2581w."},
                                      {"single_word", false},
                                      {"lstrip", false},
                                      {"rstrip", false},
                                      {"normalized", true},
                                      {"special", false}});
  const Tokenizer spans = Tokenizer::from_json(spanning.dump(), "an added token spanning");
  EXPECT_FALSE(spans.cuts_text());
  EXPECT_EQ(spans.encode("hello o w. x", false).size(), spans.encode("hello", false).size() + 3)
      << "the added token matches across the space";
}

TEST(TextStream, StopsWhenTheSinkHasEnough) {
  const Tokenizer gpt2 = Tokenizer::from_file(kFixtures + "gpt2.tokenizer.json");
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "word ";
  const std::string path = temp_file("long.txt", text);
  StreamOptions options;
  options.chunk_bytes = 1000;
  std::size_t blocks = 0;
  std::size_t ids = 0;
  encode_file(gpt2, path, "the text", options, [&](std::span<const std::int32_t> block) {
    ++blocks;
    ids += block.size();
    return ids < 50;
  });
  EXPECT_LT(ids, 2000U);  // a few chunks, not the 20000 words
  EXPECT_GE(ids, 50U);
  EXPECT_LE(blocks, 4U);
}

TEST(TextStream, RefusesByName) {
  const Tokenizer gpt2 = Tokenizer::from_file(kFixtures + "gpt2.tokenizer.json");
  const auto encode = [&](const std::string& path, StreamOptions options = {}) {
    return error_of([&] { (void)streamed(gpt2, path, options); });
  };
  EXPECT_THAT(encode("/dev/zero"), HasSubstr("the text is not a regular file"));
  EXPECT_THAT(encode(::testing::TempDir()), HasSubstr("is not a regular file"));
  EXPECT_THAT(encode("/nonexistent/x.txt"), HasSubstr("No such file"));
  const std::string fifo = test_path("stream.fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(encode(fifo), HasSubstr("is not a regular file"));  // and never blocks
  ::unlink(fifo.c_str());
  // The byte's offset in the file, past the first chunk.
  StreamOptions small;
  small.chunk_bytes = 64;
  EXPECT_THAT(encode(temp_file("bad.txt", std::string(300, 'a') + " b\xff"), small),
              HasSubstr("the text is not UTF-8 text: byte 0xff at offset 302"));
  // A text with no place to cut is held up to a bound, then refused rather than held whole.
  StreamOptions bounded;
  bounded.chunk_bytes = 64;
  bounded.most_uncut_bytes = 1000;
  EXPECT_THAT(encode(temp_file("one_word.txt", std::string(5000, 'x')), bounded),
              HasSubstr("hold no place where the tokenizer's pieces can be cut"));
  // A tokenizer with no pre-tokenizer merges a text as one word: encoded whole, up to the bound.
  const Tokenizer bare = Tokenizer::from_file(kFixtures + "handmade_bare.tokenizer.json");
  EXPECT_FALSE(bare.cuts_text());
  EXPECT_TRUE(gpt2.cuts_text());
  std::string prose;
  while (prose.size() < 5000) prose += "ab ba\n";
  EXPECT_THAT(error_of([&] { (void)streamed(bare, temp_file("prose.txt", prose), bounded); }),
              HasSubstr("this tokenizer splits the text nowhere (a normalizer, or no "
                        "pre-tokenizer that splits words), so it is encoded whole"));
}

}  // namespace
}  // namespace shardwise::text

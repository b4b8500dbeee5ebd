// shardwise's tokenizer against what Hugging Face's `tokenizers` computed for the same
// tokenizer.json files (tests/text/fixtures/, written by make_tokenizer_fixtures.py): the ids of
// hard strings with and without special tokens, decoded id sequences, the vocabulary's size.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {
namespace {

const std::string kFixtures = SHARDWISE_SOURCE_DIR "/tests/text/fixtures/";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::vector<std::int32_t> ids_of(const nlohmann::json& list) {
  return list.get<std::vector<std::int32_t>>();
}

class LibraryFixture : public ::testing::TestWithParam<std::string> {
 protected:
  Tokenizer tokenizer = Tokenizer::from_file(kFixtures + GetParam() + ".tokenizer.json");
  nlohmann::json expected = read_json(kFixtures + GetParam() + ".expected.json");
};

TEST_P(LibraryFixture, EncodesAsTheLibrary) {
  ASSERT_FALSE(expected["encode"].empty());
  for (const nlohmann::json& entry : expected["encode"]) {
    const std::string text = entry["text"].get<std::string>();
    EXPECT_EQ(tokenizer.encode(text), ids_of(entry["ids"])) << echo_input(text, 200);
    EXPECT_EQ(tokenizer.encode(text, false), ids_of(entry["ids_without_special"]))
        << echo_input(text, 200);
  }
}

TEST_P(LibraryFixture, DecodesAsTheLibrary) {
  ASSERT_FALSE(expected["decode"].empty());
  for (const nlohmann::json& entry : expected["decode"]) {
    const std::vector<std::int32_t> ids = ids_of(entry["ids"]);
    EXPECT_EQ(tokenizer.decode(ids), entry["text"].get<std::string>()) << entry["ids"].dump();
    EXPECT_EQ(tokenizer.decode(ids, true), entry["text_skipping_special"].get<std::string>())
        << entry["ids"].dump();
  }
}

TEST_P(LibraryFixture, CountsAndFindsTokensAsTheLibrary) {
  EXPECT_EQ(tokenizer.vocab_size(), expected["vocab_size"].get<std::size_t>());
  for (const auto& [token, id] : expected["token_to_id"].items()) {
    if (id.is_null()) {
      EXPECT_EQ(tokenizer.token_to_id(token), std::nullopt) << token;
    } else {
      EXPECT_EQ(tokenizer.token_to_id(token), id.get<std::int32_t>()) << token;
      EXPECT_EQ(tokenizer.id_to_token(id.get<std::int32_t>()), token);
    }
  }
  EXPECT_EQ(tokenizer.id_to_token(-1), std::nullopt);
  EXPECT_EQ(tokenizer.id_to_token(static_cast<std::int32_t>(tokenizer.vocab_size())), std::nullopt);
}

// Ranks that are threads share one tokenizer: every thread gets the ids one thread gets (the
// word cache they share is filled and read at once; the sanitizers watch it).
TEST_P(LibraryFixture, EncodesTheSameOnThreadsSharingIt) {
  std::vector<std::string> texts;
  std::vector<std::vector<std::int32_t>> ids;
  for (const nlohmann::json& entry : expected["encode"]) {
    texts.push_back(entry["text"].get<std::string>());
    ids.push_back(ids_of(entry["ids"]));
  }
  const Tokenizer shared = Tokenizer::from_file(kFixtures + GetParam() + ".tokenizer.json");
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < mismatches.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (std::size_t i = 0; i < texts.size(); ++i) {
          if (shared.encode(texts[(i + t * 7) % texts.size()]) != ids[(i + t * 7) % texts.size()]) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ::testing::Each(0));
}

// Every fixture make_tokenizer_fixtures.py wrote (each NAME.tokenizer.json beside its
// NAME.expected.json), so that a new style is tested without a list to keep.
std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  const std::string suffix = ".tokenizer.json";
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > suffix.size() && file.ends_with(suffix)) {
      names.push_back(file.substr(0, file.size() - suffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Styles, LibraryFixture, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

TEST(LibraryFixtures, AreTheStylesTheScriptWrites) {
  EXPECT_THAT(fixture_names(),
              ::testing::IsSupersetOf({"gpt2", "llama3", "smollm2", "added", "empty_affixes",
                                       "handmade_bare", "spm_legacy", "spm", "spm_legacy_added",
                                       "metaspace", "metaspace_always_split", "metaspace_never"}));
}

// The fixtures hold what these tests rely on: special tokens inside text, the template's
// <|begin_of_text|>, merges across a multi-byte character's bytes.
TEST(LibraryFixtures, CoverWhatTheyAreFor) {
  const Tokenizer llama = Tokenizer::from_file(kFixtures + "llama3.tokenizer.json");
  const std::int32_t bos = *llama.token_to_id("<|begin_of_text|>");
  EXPECT_EQ(llama.encode("").front(), bos);
  EXPECT_THAT(llama.encode("a<|end_of_text|>b", false),
              ::testing::Contains(*llama.token_to_id("<|end_of_text|>")));
  const Tokenizer gpt2 = Tokenizer::from_file(kFixtures + "gpt2.tokenizer.json");
  EXPECT_EQ(gpt2.encode("é").size(), 1U) << "no merge of a two-byte character's bytes";
}

}  // namespace
}  // namespace shardwise::text

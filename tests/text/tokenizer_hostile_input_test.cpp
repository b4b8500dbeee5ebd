// tokenizer.json files that are not one, or ask for what the tokenizer does not compute: each
// an InvalidArgument naming the field and the value, never a crash or a different tokenization.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;

const std::string kFixtures = SHARDWISE_SOURCE_DIR "/tests/text/fixtures/";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The message of reading the small hand-made tokenizer changed by `change`; the error must be
// an InvalidArgument naming the document.
std::string refusal(const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json document =
      nlohmann::json::parse(read_text(kFixtures + "handmade_merges.tokenizer.json"));
  change(document);
  try {
    (void)Tokenizer::from_json(document.dump(), "test.json");
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("test.json")) << message;
    return message;
  } catch (const std::exception& e) {
    return std::string("<not an InvalidArgument: ") + e.what() + ">";
  }
  return "<no error>";
}

nlohmann::json byte_level() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", true}};
}

// (A list of one is written json::array({...}): clang reads {x} as a copy of x where g++ makes
// a list of it.)
nlohmann::json added_token(std::int64_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

TEST(TokenizerFiles, ThatAreNotFilesAreRefusedByPath) {
  EXPECT_THAT(error_of([] { (void)Tokenizer::from_file("/dev/zero"); }),
              AllOf(HasSubstr("/dev/zero"), HasSubstr("not a regular file")));
  EXPECT_THAT(error_of([] { (void)Tokenizer::from_file("/nonexistent/tokenizer.json"); }),
              HasSubstr("/nonexistent/tokenizer.json"));
  EXPECT_THAT(error_of([] { (void)Tokenizer::from_file(kFixtures); }), HasSubstr("is a directory"));
}

TEST(TokenizerFiles, ThatAreNotJsonAreRefused) {
  const std::string text = read_text(kFixtures + "llama3.tokenizer.json");
  for (const std::size_t cut : {std::size_t{0}, std::size_t{1}, text.size() / 2, text.size() - 2}) {
    EXPECT_THAT(error_of([&] { (void)Tokenizer::from_json(text.substr(0, cut), "cut.json"); }),
                AllOf(HasSubstr("invalid JSON in cut.json")))
        << cut;
  }
  EXPECT_THAT(error_of([] { (void)Tokenizer::from_json(std::string(1000, '\0'), "zeros"); }),
              HasSubstr("invalid JSON in zeros"));
  EXPECT_THAT(error_of([] { (void)Tokenizer::from_json("[]", "list.json"); }),
              HasSubstr("must be a JSON object"));
  EXPECT_THAT(error_of([] { (void)Tokenizer::from_json(std::string(100000, '['), "deep"); }),
              HasSubstr("deep"));
  EXPECT_THAT(
      error_of([] { (void)Tokenizer::from_json(R"({"model": {}, "model": {}})", "twice"); }),
      HasSubstr("has the key \"model\" twice"));
  EXPECT_THAT(error_of([] { (void)Tokenizer::from_json("{}", "empty.json"); }),
              HasSubstr("missing required field 'model'"));
}

TEST(TokenizerFiles, WithBadVocabulariesAreRefusedNamingTheToken) {
  EXPECT_THAT(refusal([](auto& d) { d["model"]["vocab"]["<unk>"] = 20; }),
              AllOf(HasSubstr("'<unk>' the id 20"), HasSubstr("outside 0 to 8")));
  EXPECT_THAT(refusal([](auto& d) { d["model"]["vocab"]["<unk>"] = -1; }), HasSubstr("the id -1"));
  EXPECT_THAT(refusal([](auto& d) { d["model"]["vocab"]["<unk>"] = 2; }),
              HasSubstr("gives the id 2 to both '<unk>' and 'c'"));
  EXPECT_THAT(refusal([](auto& d) { d["model"]["vocab"]["<unk>"] = 1e30; }),
              AllOf(HasSubstr("model.vocab['<unk>']"), HasSubstr("must be an integer")));
  EXPECT_THAT(refusal([](auto& d) {
                d["model"]["vocab"]["<unk>"] = std::numeric_limits<std::uint64_t>::max();
              }),
              HasSubstr("beyond the largest 64-bit integer"));
  EXPECT_THAT(refusal([](auto& d) { d["model"]["vocab"]["<unk>"] = "8"; }),
              HasSubstr("must be an integer, not string"));
  EXPECT_THAT(refusal([](auto& d) { d["model"]["vocab"] = nlohmann::json::array(); }),
              HasSubstr("'model.vocab' must be an object"));
}

TEST(TokenizerFiles, WithBadMergesAreRefusedNamingTheMerge) {
  EXPECT_THAT(refusal([](auto& d) {
                d["model"]["merges"][1] = {"a", "zz"};
              }),
              HasSubstr("'model.merges[1]' names 'zz', which model.vocab lacks"));
  EXPECT_THAT(refusal([](auto& d) {
                d["model"]["merges"][1] = {"c", "a"};
              }),
              HasSubstr("'model.merges[1]' makes 'ca', which model.vocab lacks"));
  EXPECT_THAT(refusal([](auto& d) { d["model"]["merges"][1] = "a b"; }),
              HasSubstr("merges[0] is a pair, so every merge must be a pair"));
  EXPECT_THAT(refusal([](auto& d) {
                d["model"]["merges"] = {"b c", "a b c"};
              }),
              HasSubstr("'model.merges[1]' is \"a b c\": a merge string is two tokens"));
  EXPECT_THAT(refusal([](auto& d) {
                d["model"]["merges"] = {"b c", 7};
              }),
              HasSubstr("every merge must be a string"));
  EXPECT_THAT(refusal([](auto& d) {
                d["model"]["merges"][0] = {"b", "c", "a"};
              }),
              HasSubstr("'model.merges[0]' is"));
}

TEST(TokenizerFiles, AskingForWhatIsNotComputedAreRefusedByName) {
  const auto expect = [](const std::function<void(nlohmann::json&)>& change,
                         const std::string& words) {
    EXPECT_THAT(refusal(change), HasSubstr(words));
  };
  expect([](auto& d) { d["model"]["dropout"] = 0.1; }, "'model.dropout' is 0.1");
  expect([](auto& d) { d["model"]["type"] = "WordPiece"; }, "'model.type' is \"WordPiece\"");
  expect([](auto& d) { d["model"]["type"] = "Unigram"; }, "'model.type' is \"Unigram\"");
  expect([](auto& d) { d["model"]["unk_token"] = "<missing>"; },
         "'model.unk_token' is '<missing>', which model.vocab lacks");
  expect([](auto& d) { d["model"]["continuing_subword_prefix"] = "##"; },
         "'model.continuing_subword_prefix' is \"##\"");
  expect([](auto& d) { d["model"]["end_of_word_suffix"] = "</w>"; },
         "'model.end_of_word_suffix' is \"</w>\"");
  for (const char* type :
       {"NFC", "NFKC", "NFD", "Lowercase", "Strip", "Precompiled", "BertNormalizer", "ByteLevel"}) {
    expect(
        [&](auto& d) {
          d["normalizer"] = {{"type", type}};
        },
        "'normalizer.type' is '" + std::string(type) +
            "': the normalizers computed are Prepend, Replace");
  }
  expect([](auto& d) { d["truncation"] = {{"max_length", 8}}; }, "'truncation' is");
  expect([](auto& d) { d["padding"] = {{"strategy", "BatchLongest"}}; }, "'padding' is");
  expect([](auto& d) { d["version"] = "2.0"; }, "'version' is \"2.0\"");
  expect([](auto& d) { d["surprise"] = 1; }, "unknown field 'surprise'");
  expect(
      [](auto& d) {
        d["pre_tokenizer"] = {{"type", "Whitespace"}};
      },
      "'pre_tokenizer.type' is 'Whitespace'");
  expect(
      [](auto& d) {
        d["pre_tokenizer"] = {{"type", "ByteLevel"}};
      },
      "missing required field 'pre_tokenizer.add_prefix_space'");
  const auto split = [](nlohmann::json pattern, const std::string& behavior, bool invert) {
    return [=](nlohmann::json& d) {
      d["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers",
                             {{{"type", "Split"},
                               {"pattern", pattern},
                               {"behavior", behavior},
                               {"invert", invert}}}}};
    };
  };
  expect(split({{"Regex", "\\s+"}}, "Isolated", false),
         "'pre_tokenizer.pretokenizers[0].pattern.Regex' is '\\s+': only GPT-2's and Llama 3's");
  expect(split({{"String", " "}}, "Isolated", false), "'pre_tokenizer.pretokenizers[0].pattern'");
  const std::string gpt2 =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  expect(split({{"Regex", gpt2}}, "Removed", false), "'Removed': only Isolated");
  expect(split({{"Regex", gpt2}}, "Isolated", true), "invert' is true");
  expect([](auto& d) { d["decoder"] = {{"type", "WordPiece"}}; }, "'decoder.type' is 'WordPiece'");
  expect([](auto& d) { d["decoder"] = {{"type", "CTC"}}; }, "'decoder.type' is 'CTC'");
  expect(
      [](auto& d) {
        d["post_processor"] = {{"type", "BertProcessing"}};
      },
      "'post_processor.type' is 'BertProcessing'");
}

// transformers' converters and the library's trainer given "" write "" for no affix, which the
// library reads as none: such a file is read, and gives the ids of the same file with null.
TEST(TokenizerFiles, WithEmptyAffixesAreReadAsWithoutAffixes) {
  nlohmann::json document =
      nlohmann::json::parse(read_text(kFixtures + "handmade_merges.tokenizer.json"));
  ASSERT_TRUE(document["model"]["continuing_subword_prefix"].is_null());
  const Tokenizer without = Tokenizer::from_json(document.dump(), "null affixes");
  document["model"]["continuing_subword_prefix"] = "";
  document["model"]["end_of_word_suffix"] = "";
  const Tokenizer with_empty = Tokenizer::from_json(document.dump(), "empty affixes");
  for (const std::string text : {"abc", "abc abc", "cab a", "bcab"}) {
    EXPECT_EQ(with_empty.encode(text), without.encode(text)) << text;
  }
}

// The SentencePiece-style steps read what the library computes with them and refuse the rest
// (a regular expression, a trailing Strip, a replacement of two characters), naming the field.
TEST(TokenizerFiles, AskingForSentencePieceStepsNotComputedAreRefusedByName) {
  const auto expect = [](const std::function<void(nlohmann::json&)>& change,
                         const std::string& words) {
    EXPECT_THAT(refusal(change), HasSubstr(words));
  };
  const auto replace = [](nlohmann::json pattern) {
    return nlohmann::json{{"type", "Replace"}, {"pattern", pattern}, {"content", "\u2581"}};
  };
  expect(
      [&](auto& d) {
        d["normalizer"] = {
            {"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace({{"Regex", " {2,}"}})}}};
      },
      "'normalizer.normalizers[1].pattern' is {\"Regex\":\" {2,}\"}: only a plain {\"String\"");
  expect(
      [&](auto& d) {
        d["normalizer"] = replace({{"String", ""}});
      },
      "'normalizer.pattern.String' is \"\": an empty pattern");
  expect([&](auto& d) { d["decoder"] = replace({{"Regex", "x"}}); }, "'decoder.pattern' is");
  expect(
      [](auto& d) {
        d["decoder"] = {{"type", "Sequence"},
                        {"decoders",
                         {{{"type", "Fuse"}},
                          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}}}};
      },
      "'decoder.decoders[1].stop' is 1");
  expect(
      [](auto& d) {
        d["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}};
      },
      "'decoder.content' is 'ab': one character is expected");
  const auto metaspace = [](nlohmann::json settings) {
    return [=](nlohmann::json& d) {
      d["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
      d["pre_tokenizer"].update(settings);
    };
  };
  expect(metaspace({{"replacement", "__"}}), "'pre_tokenizer.replacement' is '__'");
  expect(metaspace({{"prepend_scheme", "sometimes"}}),
         "'pre_tokenizer.prepend_scheme' is 'sometimes'");
  expect(metaspace({{"prepend_scheme", "first"}, {"add_prefix_space", false}}),
         "'pre_tokenizer.add_prefix_space' is false but the prepend_scheme is not \"never\"");
  expect(metaspace({{"surprise", 1}}), "unknown field 'pre_tokenizer.surprise'");
}

// A normalizer or Replace decoder that grows the text without bound (a long content, Replaces
// feeding each other) is refused as it runs, naming the limit, rather than exhausting memory.
TEST(TokenizerFiles, WhoseReplacementsGrowTextWithoutBoundAreRefusedAsTheyRun) {
  nlohmann::json document =
      nlohmann::json::parse(read_text(kFixtures + "handmade_merges.tokenizer.json"));
  const nlohmann::json doubling = {
      {"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}};
  document["normalizer"] = {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}};
  for (int i = 0; i < 8; ++i) document["normalizer"]["normalizers"].push_back(doubling);
  const Tokenizer grows = Tokenizer::from_json(document.dump(), "doubling");
  EXPECT_EQ(grows.encode("a").size(), 256U);  // 256 bytes of "a": within the limit
  EXPECT_THAT(error_of([&] { (void)grows.encode(std::string(100000, 'a')); }),
              HasSubstr("normalizer or Replace decoder makes more than 1604096 bytes"));
  document["normalizer"] = nullptr;
  document["decoder"] = {
      {"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(100, 'b')}};
  const Tokenizer decoder = Tokenizer::from_json(document.dump(), "long content");
  EXPECT_EQ(decoder.decode(std::vector<std::int32_t>{0, 1}), std::string(100, 'b') + "b");
  EXPECT_THAT(error_of([&] { (void)decoder.decode(std::vector<std::int32_t>(100000, 0)); }),
              HasSubstr("makes more than"));
}

// Older files spell a Metaspace without prepend_scheme or split, with add_prefix_space: the
// library's defaults ("always", split) apply, and add_prefix_space false goes with "never" (alone
// it contradicts the default "always": the library refuses that, and so does this).
TEST(TokenizerFiles, WithAnOlderMetaspaceAreReadWithTheLibrarysDefaults) {
  nlohmann::json document =
      nlohmann::json::parse(read_text(kFixtures + "metaspace_always_split.tokenizer.json"));
  const Tokenizer current = Tokenizer::from_json(document.dump(), "current");
  document["pre_tokenizer"] = {{"type", "Metaspace"},
                               {"replacement", "\u2581"},
                               {"add_prefix_space", true},
                               {"str_rep", "\u2581"}};
  const Tokenizer older = Tokenizer::from_json(document.dump(), "older");
  for (const std::string text : {"the licence", " two  spaces", "<s>x"}) {
    EXPECT_EQ(older.encode(text), current.encode(text)) << text;
  }
  document["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", false}};
  EXPECT_THAT(error_of([&] { (void)Tokenizer::from_json(document.dump(), "contradiction"); }),
              HasSubstr("'pre_tokenizer.add_prefix_space' is false but the prepend_scheme"));
  document["pre_tokenizer"]["prepend_scheme"] = "never";
  const Tokenizer older_never = Tokenizer::from_json(document.dump(), "older never");
  document["pre_tokenizer"].erase("add_prefix_space");
  const Tokenizer never = Tokenizer::from_json(document.dump(), "never");
  for (const std::string text : {"the licence", " two  spaces", "<s>x"}) {
    EXPECT_EQ(older_never.encode(text), never.encode(text)) << text;
  }
  EXPECT_NE(never.encode("the"), current.encode("the")) << "no \u2581 prepended";
}

// A normalized added token is found as the normalizer spells it: two that it spells alike would
// leave the choice to the library's automaton.
TEST(TokenizerFiles, WithAddedTokensNormalizedAlikeAreRefused) {
  EXPECT_THAT(refusal([](auto& d) {
                d["normalizer"] = {
                    {"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
                nlohmann::json spaced = added_token(9, " x");
                nlohmann::json marked = added_token(10, "\u2581x");
                spaced["normalized"] = true;
                marked["normalized"] = true;
                d["added_tokens"] = {spaced, marked};
              }),
              HasSubstr("added token '\u2581x' is found as '\u2581x', as another token is"));
}

nlohmann::json template_processing(nlohmann::json single, std::int64_t special_id) {
  const nlohmann::json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  return {
      {"type", "TemplateProcessing"},
      {"single", std::move(single)},
      {"pair", {a}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {special_id}}, {"tokens", {"<s>"}}}}}}};
}

TEST(TokenizerFiles, WithBadTemplatesAreRefused) {
  const nlohmann::json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const nlohmann::json b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  const nlohmann::json s = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  const nlohmann::json t = {{"SpecialToken", {{"id", "<t>"}, {"type_id", 0}}}};
  EXPECT_THAT(refusal([&](auto& d) {
                d["post_processor"] = template_processing({s, a}, 9);
              }),
              HasSubstr("'post_processor.special_tokens['<s>'].ids[0]' is 9, outside the "
                        "vocabulary of 9 tokens"));
  EXPECT_THAT(refusal([&](auto& d) {
                d["post_processor"] = template_processing({s, b}, 0);
              }),
              HasSubstr("'post_processor.single[1].Sequence.id' is 'B'"));
  EXPECT_THAT(refusal([&](auto& d) {
                d["post_processor"] = template_processing({t, a}, 0);
              }),
              HasSubstr("is '<t>', which the processor's special_tokens lacks"));
  EXPECT_THAT(
      refusal([&](auto& d) {
        d["post_processor"] = {
            {"type", "Sequence"},
            {"processors", {template_processing({s, a}, 0), template_processing({s, a}, 0)}}};
      }),
      HasSubstr("'post_processor.processors[1]' is a second TemplateProcessing"));
  // One template in a Sequence, after ByteLevel, as Llama 3's: read.
  nlohmann::json document =
      nlohmann::json::parse(read_text(kFixtures + "handmade_merges.tokenizer.json"));
  document["post_processor"] = {{"type", "Sequence"},
                                {"processors", {byte_level(), template_processing({s, a, a}, 8)}}};
  const Tokenizer tokenizer = Tokenizer::from_json(document.dump(), "template");
  EXPECT_EQ(tokenizer.encode("ab"), (std::vector<std::int32_t>{8, 4, 4}));
  EXPECT_EQ(tokenizer.encode("ab", false), (std::vector<std::int32_t>{4, 4}));
}

TEST(TokenizerFiles, WithBadAddedTokensAreRefused) {
  EXPECT_THAT(
      refusal([](auto& d) { d["added_tokens"] = nlohmann::json::array({added_token(3, "<x>")}); }),
      HasSubstr("'added_tokens[0].id' of '<x>' is 3, but the library gives it 9"));
  EXPECT_THAT(
      refusal([](auto& d) { d["added_tokens"] = nlohmann::json::array({added_token(9, "abc")}); }),
      HasSubstr("is 9, but the library gives it 6 (its id in model.vocab)"));
  EXPECT_THAT(refusal([](auto& d) {
                d["added_tokens"] = {added_token(9, "<x>"), added_token(10, "<x>")};
              }),
              HasSubstr("added_tokens holds '<x>' twice"));
  EXPECT_THAT(
      refusal([](auto& d) { d["added_tokens"] = nlohmann::json::array({added_token(9, "")}); }),
      HasSubstr("'added_tokens[0].content' is empty"));
  EXPECT_THAT(refusal([](auto& d) {
                nlohmann::json stripped = added_token(9, "<x>");
                stripped["rstrip"] = true;
                d["added_tokens"] = {stripped, added_token(10, " y")};
              }),
              HasSubstr("' y' starts with a space and '<x>' has rstrip"));
  EXPECT_THAT(refusal([](auto& d) {
                nlohmann::json token = added_token(9, "<x>");
                token.erase("special");
                d["added_tokens"] = nlohmann::json::array({token});
              }),
              HasSubstr("missing required field 'added_tokens[0].special'"));
}

TEST(Tokenizer, RefusesIdsOutsideTheVocabularyAndTextThatIsNotUtf8) {
  const Tokenizer tokenizer = Tokenizer::from_file(kFixtures + "gpt2.tokenizer.json");
  const std::vector<std::int32_t> negative = {1, -1};
  EXPECT_THAT(error_of([&] { (void)tokenizer.decode(negative); }),
              HasSubstr("decode: id -1 is outside the vocabulary of 600 tokens"));
  const std::vector<std::int32_t> past = {600};
  EXPECT_THAT(error_of([&] { (void)tokenizer.decode(past); }), HasSubstr("id 600"));
  EXPECT_THAT(error_of([&] { (void)tokenizer.encode("ok \xff\xfe"); }),
              HasSubstr("the text to encode is not UTF-8: byte 0xff at offset 3"));
  EXPECT_THAT(error_of([&] { (void)tokenizer.encode("\xed\xa0\x80"); }), HasSubstr("not UTF-8"));
}

}  // namespace
}  // namespace shardwise::text

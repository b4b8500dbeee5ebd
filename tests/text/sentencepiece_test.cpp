// SentencePiece-style BPE as the tokenizer.json of Llama 2, TinyLlama, Mistral and Mixtral hold
// it, on a vocabulary small enough to read: the ids and text below are what the tokenizers
// library (0.23) computes for the same file. The normalizer prepends "▁" to each piece between
// added tokens, Metaspace's "first" only to the piece that starts the text; a character the
// vocabulary lacks becomes its bytes' tokens, or <unk> where one of them is missing; decoding
// turns runs of byte tokens back into text.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {
namespace {

using Ids = std::vector<std::int32_t>;

// <unk> 0, <s> 1, </s> 2, ▁ 3, a 4, b 5, ▁a 6, ab 7, ▁ab 8, and the byte tokens of "é" (C3 A9)
// and of a space (20); merges a+b, ▁+a, ▁+ab.
nlohmann::json document(nlohmann::json normalizer, nlohmann::json pre_tokenizer,
                        nlohmann::json decoder) {
  nlohmann::json added = nlohmann::json::array();
  for (const char* content : {"<unk>", "<s>", "</s>"}) {
    added.push_back({{"id", added.size()},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const nlohmann::json vocab = {{"<unk>", 0},    {"<s>", 1},    {"</s>", 2},    {"\u2581", 3},
                                {"a", 4},        {"b", 5},      {"\u2581a", 6}, {"ab", 7},
                                {"\u2581ab", 8}, {"<0xC3>", 9}, {"<0xA9>", 10}, {"<0x20>", 11}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", std::move(normalizer)},
          {"pre_tokenizer", std::move(pre_tokenizer)},
          {"post_processor", nullptr},
          {"decoder", std::move(decoder)},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", nlohmann::json::array({nlohmann::json::array({"a", "b"}),
                                              nlohmann::json::array({"\u2581", "a"}),
                                              nlohmann::json::array({"\u2581", "ab"})})}}}};
}

nlohmann::json replace(const std::string& pattern, const std::string& content) {
  return {{"type", "Replace"}, {"pattern", {{"String", pattern}}}, {"content", content}};
}

// Llama 2's: [Prepend "▁", Replace " " -> "▁"], no pre-tokenizer.
const nlohmann::json kLegacyNormalizer = {
    {"type", "Sequence"},
    {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace(" ", "\u2581")}}};
// Llama 2's and Mistral's: [Replace "▁" -> " ", ByteFallback, Fuse, Strip one leading space].
const nlohmann::json kReplaceChain = {
    {"type", "Sequence"},
    {"decoders",
     {replace("\u2581", " "),
      {{"type", "ByteFallback"}},
      {{"type", "Fuse"}},
      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};

nlohmann::json metaspace(const std::string& scheme, bool split) {
  return {{"type", "Metaspace"},
          {"replacement", "\u2581"},
          {"prepend_scheme", scheme},
          {"split", split}};
}

Tokenizer tokenizer(const nlohmann::json& doc) { return Tokenizer::from_json(doc.dump(), "spm"); }

TEST(SentencePieceStyle, LegacyNormalizerPrependsToEachPieceBetweenAddedTokens) {
  const Tokenizer legacy = tokenizer(document(kLegacyNormalizer, nullptr, kReplaceChain));
  EXPECT_EQ(legacy.encode("ab"), (Ids{8}));
  EXPECT_EQ(legacy.encode("ab ab"), (Ids{8, 8}));       // the whole text is one word
  EXPECT_EQ(legacy.encode("ab<s>ab"), (Ids{8, 1, 8}));  // "▁" again after <s>
  EXPECT_EQ(legacy.encode("a  b"), (Ids{6, 3, 3, 5}));
  EXPECT_EQ(legacy.encode(" ab"), (Ids{3, 8}));  // prepended before the space's own
  EXPECT_EQ(legacy.encode(""), Ids{});           // nothing prepended to nothing
  EXPECT_EQ(legacy.encode("<s>"), (Ids{1}));
}

TEST(SentencePieceStyle, MetaspacePrependsAsItsSchemeSays) {
  const Tokenizer first = tokenizer(document(nullptr, metaspace("first", false), kReplaceChain));
  EXPECT_EQ(first.encode("ab"), (Ids{8}));
  EXPECT_EQ(first.encode("<s>ab"), (Ids{1, 7}));  // not the text's start: no "▁"
  EXPECT_EQ(first.encode("ab<s>ab"), (Ids{8, 1, 7}));
  EXPECT_EQ(first.encode(" ab"), (Ids{8}));  // starts with one already
  const Tokenizer always = tokenizer(document(nullptr, metaspace("always", true), nullptr));
  EXPECT_EQ(always.encode("<s>ab"), (Ids{1, 8}));
  EXPECT_EQ(always.encode("a  b"), (Ids{6, 3, 3, 5}));  // split: "▁a", "▁", "▁b"
  const Tokenizer never = tokenizer(document(nullptr, metaspace("never", false), kReplaceChain));
  EXPECT_EQ(never.encode("ab ab"), (Ids{7, 8}));
  EXPECT_EQ(never.encode("a  b"), (Ids{4, 3, 3, 5}));
}

TEST(SentencePieceStyle, CharactersOutsideTheVocabularyBecomeByteTokensOrUnknown) {
  const Tokenizer never = tokenizer(document(nullptr, metaspace("never", false), kReplaceChain));
  EXPECT_EQ(never.encode("\u00e9a"), (Ids{9, 10, 4}));  // é: <0xC3> <0xA9>
  EXPECT_EQ(never.encode("x"), (Ids{0}));               // <0x78> is missing: <unk>
  // An unknown character waits for the next known one, byte tokens do not end the wait: the
  // library puts <unk> after é's bytes, and fuses the two unknowns around them.
  EXPECT_EQ(never.encode("\U0001f600\u00e9"), (Ids{9, 10, 0}));
  EXPECT_EQ(never.encode("\U0001f600\u00e9\U0001f600a"), (Ids{9, 10, 0, 4}));
}

TEST(SentencePieceStyle, DecodesByteTokensAndStripsThePrependedSpace) {
  const Tokenizer legacy = tokenizer(document(kLegacyNormalizer, nullptr, kReplaceChain));
  EXPECT_EQ(legacy.decode(Ids{8, 3, 8}), "ab  ab");
  EXPECT_EQ(legacy.decode(Ids{1, 8}), "<s> ab");
  EXPECT_EQ(legacy.decode(Ids{1, 8}, true), "ab");
  EXPECT_EQ(legacy.decode(Ids{6, 9, 10}), "a\u00e9");
  EXPECT_EQ(legacy.decode(Ids{11, 4}), "a");  // <0x20> is a space, stripped as the first
  // A run of byte tokens that is not UTF-8 is one U+FFFD per byte, the valid ones too.
  EXPECT_EQ(legacy.decode(Ids{9, 4}), "\ufffda");
  EXPECT_EQ(legacy.decode(Ids{9, 10, 9}), "\ufffd\ufffd\ufffd");
  // The Metaspace decoder drops every "▁" of the first token, then spells them as spaces.
  const Tokenizer always =
      tokenizer(document(nullptr, metaspace("always", true), metaspace("always", true)));
  EXPECT_EQ(always.decode(Ids{3, 3, 4}), " a");
  EXPECT_EQ(always.decode(Ids{9, 4}), "<0xC3>a");  // without ByteFallback, tokens as they are
}

// transformers writes an empty Sequence for no normalizer in some conversions, and the library
// reads that as none; an empty decoder Sequence joins the tokens as they are, no decoder with
// spaces.
TEST(SentencePieceStyle, EmptySequencesAreNoStepsAndNoDecoderJoinsWithSpaces) {
  const nlohmann::json empty_normalizer = {{"type", "Sequence"},
                                           {"normalizers", nlohmann::json::array()}};
  const nlohmann::json empty_decoder = {{"type", "Sequence"},
                                        {"decoders", nlohmann::json::array()}};
  const Tokenizer joined = tokenizer(document(empty_normalizer, nullptr, empty_decoder));
  EXPECT_EQ(joined.encode("ab"), (Ids{7}));
  EXPECT_EQ(joined.decode(Ids{7, 4}), "aba");
  const Tokenizer spaced = tokenizer(document(nullptr, nullptr, nullptr));
  EXPECT_EQ(spaced.decode(Ids{7, 4}), "ab a");
}

// A text is cut for encoding in pieces (Tokenizer::last_cut) only where the pieces encode to the
// whole's ids: SentencePiece's spaces between letters (under its Prepend and Replace normalizer
// or a Metaspace pre-tokenizer, split or not), where no token holds "▁" after a letter; never
// under a normalizer before another pre-tokenizer.
TEST(SentencePieceStyle, TextsAreCutOnlyWhereThePiecesEncodeAsTheWhole) {
  const std::string text = "one line\nand words between spaces\nmore";
  EXPECT_EQ(tokenizer(document(kLegacyNormalizer, nullptr, kReplaceChain)).last_cut(text), 26U);
  EXPECT_EQ(tokenizer(document(nullptr, metaspace("first", false), nullptr)).last_cut(text), 26U);
  const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", true},
                                     {"use_regex", true}};
  EXPECT_GT(tokenizer(document(nullptr, byte_level, nullptr)).last_cut(text), 0U);
  EXPECT_EQ(tokenizer(document(kLegacyNormalizer, byte_level, nullptr)).last_cut(text), 0U);
}

}  // namespace
}  // namespace shardwise::text

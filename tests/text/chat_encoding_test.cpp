// A conversation's assistant tokens as transformers marks them (return_assistant_tokens_mask
// through its offsets and char_to_token), on the cases where encoding the text before a range's
// edge alone would part from the whole's tokens earlier than the edge; and where each token lies
// in its text, byte-level and SentencePiece-style.
#include "shardwise/text/chat_encoding.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_of.hpp"

namespace shardwise::text {
namespace {

using shardwise::testing::error_of;
using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

const std::string kFixtures = SHARDWISE_SOURCE_DIR "/tests/text/fixtures/";

const ChatTemplate kGeneration = ChatTemplate::parse(
    "{% for m in messages %}{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}"
    "{% endgeneration %}{% else %}{{ m['content'] }}{% endif %}{% endfor %}",
    "a template with generation blocks");

std::vector<std::uint8_t> assistant_marks(const Tokenizer& tokenizer, const Json& messages) {
  return encode_chat(kGeneration, tokenizer, messages, Json::object()).assistant;
}

// transformers 5.25 on the smollm2 fixture: "assi" + "stant" is as|s|ist|ant, and the token
// "ist" holds bytes of both sides.
TEST(ChatEncoding, AssistantTokensAreTransformersMarksWhereATokenSpansAnEdge) {
  const Tokenizer tokenizer = Tokenizer::from_file(kFixtures + "smollm2.tokenizer.json");
  const Json first = Json::parse(
      R"([{"role": "user", "content": "assi"}, {"role": "assistant", "content": "stant"}])");
  EXPECT_EQ(assistant_marks(tokenizer, first), (std::vector<std::uint8_t>{0, 0, 1, 1}));
  const Json middle = Json::parse(R"([{"role": "user", "content": "x"},
      {"role": "assistant", "content": "assi"}, {"role": "user", "content": "stant"}])");
  EXPECT_EQ(assistant_marks(tokenizer, middle), (std::vector<std::uint8_t>{0, 1, 1, 1, 0}));
}

// A line's tools and keyword arguments reach every render, as apply_chat_template passes them.
TEST(ChatEncoding, VariablesReachTheTemplate) {
  const ChatTemplate uses = ChatTemplate::parse(
      "{% if tools %}[{{ tools | length }} tools]{% endif %}{{ greeting }}{% for m in messages %}"
      "{{ m['content'] }}{% endfor %}",
      "a template reading variables");
  const Tokenizer tokenizer = Tokenizer::from_file(kFixtures + "smollm2.tokenizer.json");
  const Json messages = Json::parse(R"([{"role": "user", "content": "a"},
      {"role": "assistant", "content": "b"}])");
  const Json variables = Json::parse(R"({"tools": [{"name": "f"}], "greeting": "Hi "})");
  const EncodedChat chat = encode_chat(uses, tokenizer, messages, Json::object(), {}, variables);
  EXPECT_EQ(chat.text, "[1 tools]Hi ab");
  EXPECT_EQ(chat.assistant.back(), 1);
}

TEST(TokenSpans, EachTokenLiesWhereItsBytesAre) {
  const Tokenizer gpt2 = Tokenizer::from_file(kFixtures + "gpt2.tokenizer.json");
  const std::string text = "The licensee<|endoftext|> café\n";
  const std::vector<std::int32_t> ids = gpt2.encode(text, false);
  const std::vector<Tokenizer::Span> spans = gpt2.token_spans(text, ids);
  ASSERT_EQ(spans.size(), ids.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].begin, at) << i;  // consecutive, covering the text
    EXPECT_EQ(gpt2.encode(text.substr(spans[i].begin, spans[i].end - spans[i].begin), false),
              std::vector<std::int32_t>{ids[i]})
        << i;
    at = spans[i].end;
  }
  EXPECT_EQ(at, text.size());
  // SentencePiece: the "▁" put before the text stands for no byte of it.
  const Tokenizer spm = Tokenizer::from_file(kFixtures + "spm_legacy.tokenizer.json");
  const std::string words = "one two";
  const std::vector<Tokenizer::Span> pieces = spm.token_spans(words, spm.encode(words, false));
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.front().begin, 0U);
  EXPECT_EQ(pieces.back().end, words.size());
  EXPECT_THAT(error_of([&] { (void)spm.token_spans("one three", spm.encode(words, false)); }),
              HasSubstr("cannot be laid over the text"));
}

}  // namespace
}  // namespace shardwise::text

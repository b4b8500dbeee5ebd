// Chat templates rendered as transformers renders them with Python's jinja2: the published
// templates of tests/text/fixtures/chat/ (make_chat_fixtures.py) byte for byte, with the
// template's raise_exception messages and the generation blocks' ranges; jinja2's whitespace
// rules and Python's printing; what the engine refuses, by name and place; hostile templates
// stopped quickly by their bounds.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../error_of.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/chat_template.hpp"

namespace shardwise::text {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

const std::string kFixtures = SHARDWISE_SOURCE_DIR "/tests/text/fixtures/chat/";

Json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

// The fixtures' frozen clock: 2024-07-26 10:30.
ChatRenderOptions frozen_clock() {
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  now.tm_hour = 10;
  now.tm_min = 30;
  ChatRenderOptions options;
  options.now = now;
  return options;
}

std::string render(std::string_view source, const Json& context = Json::object()) {
  return ChatTemplate::parse(source, "test").render(context, frozen_clock());
}

class PublishedTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(PublishedTemplate, RendersEveryConversationAsTransformers) {
  const Json fixture = read_json(kFixtures + GetParam() + ".json");
  const ChatTemplate chat = ChatTemplate::parse(fixture["template"].get<std::string>(), GetParam());
  ASSERT_EQ(fixture["now"], "2024-07-26");
  int rendered = 0;
  int raised = 0;
  for (const Json& c : fixture["cases"]) {
    Json context = chat_context(c["messages"], c["add_generation_prompt"].get<bool>(),
                                fixture["special_tokens"]);
    for (const auto& [key, value] : c["extra"].items()) context[key] = value;
    const std::string conversation = c["messages"].dump();
    if (c.contains("text")) {
      const RenderedChat out = chat.render_with_generation_ranges(context, frozen_clock());
      EXPECT_EQ(out.text, c["text"].get<std::string>()) << conversation;
      std::vector<GenerationRange> expected;
      if (c.contains("generation")) {
        for (const Json& r : c["generation"])
          expected.push_back({r[0].get<std::size_t>(), r[1].get<std::size_t>()});
      }
      EXPECT_EQ(out.generation, expected) << conversation;
      ++rendered;
    } else {
      const std::string message =
          testing::error_of([&] { (void)chat.render(context, frozen_clock()); });
      const Json& error = c["error"];
      if (error["raised"].get<bool>()) {
        EXPECT_THAT(message, HasSubstr("raised: " + error["message"].get<std::string>()))
            << conversation;
      } else {
        // jinja2 failed otherwise (an undefined attribute, str + list): so must we.
        EXPECT_THAT(message, HasSubstr("chat template '" + GetParam() + "'")) << conversation;
        if (error["type"] == "UndefinedError") {
          EXPECT_THAT(message, HasSubstr(error["message"].get<std::string>())) << conversation;
        }
      }
      ++raised;
    }
  }
  EXPECT_GT(rendered, 50);
  RecordProperty("rendered", rendered);
  RecordProperty("raised", raised);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PublishedTemplate,
                         ::testing::Values("smollm2_135m_instruct", "llama3_instruct",
                                           "llama3_1_instruct", "llama3_2_instruct",
                                           "tinyllama_chat", "mistral_7b_instruct_v0_1",
                                           "mistral_7b_instruct_v0_2", "mistral_7b_instruct_v0_3",
                                           "qwen2_5_instruct", "qwen3", "gemma_it",
                                           "phi3_mini_instruct", "chatml_generation"));

TEST(ChatTemplateWhitespace, TrimsAndStripsAsJinja) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before one.
  EXPECT_EQ(render("a\n  {% if true %}\nx\n  {% endif %}\nb"), "a\nx\nb");
  // Comments are blocks for both rules.
  EXPECT_EQ(render("a\n  {# c #}\nb"), "a\nb");
  // lstrip only from a line's start: text before the tag on its line keeps its spaces.
  EXPECT_EQ(render("a  {# c #}  \nb"), "a    \nb");
  EXPECT_EQ(render("{% if 1 %}  {% if 1 %}x{% endif %}{% endif %}"), "  x");
  // A variable tag is neither trimmed nor stripped.
  EXPECT_EQ(render("{{ 1 }}\n  {% if 1 %}y{% endif %}"), "1\ny");
  // '-' takes all whitespace on its side, '+' keeps it.
  EXPECT_EQ(render("a \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("x {%+ if 1 %}y{% endif +%}\nz"), "x y\nz");
  // One trailing newline of the template goes, as jinja2's keep_trailing_newline=False.
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(ChatTemplateValues, PrintAsPython) {
  EXPECT_EQ(render("{{ [1, 'a', none, 1.5, true, (1, 2), {'a': \"it's\"}] }}"),
            "[1, 'a', None, 1.5, True, (1, 2), {'a': \"it's\"}]");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e15 }} {{ 0.1 }} {{ 1/3 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} "
                   "{{ 2**10 }} {{ 10/2 }}"),
            "1e+16 1000000000000000.0 0.1 0.3333333333333333 3 -4 2 1024 5.0");
  EXPECT_EQ(render("{{ 'abc'[::-1] }} {{ [1,2,3][-1] }} {{ 'héllo'[1] }} {{ 'héllo'|length }}"),
            "cba 3 é 5");
  EXPECT_EQ(render("{{ 'x' if false }}|{{ (none if false) is none }}|{{ u ~ 'x' }}|{{ u|length }}"),
            "|False|x|0");
  EXPECT_EQ(render("{{ 'a\\x41\\u00e9\\q' }}"), "aAé\\q");
  EXPECT_EQ(render("{{ d|tojson }}|{{ d|tojson(indent=2) }}",
                   Json::parse(R"({"d": {"a": [1, 2.0, "é\n\""], "b": null}})")),
            "{\"a\": [1, 2.0, \"é\\n\\\"\"], \"b\": null}|{\n  \"a\": [\n    1,\n    2.0,\n    "
            "\"é\\n\\\"\"\n  ],\n  \"b\": null\n}");
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1,2] %}[{{ x }}]{% set x = x + 10 %}({{ x }}){% "
                   "endfor %}{{ x }}"),
            "[1](11)[1](11)1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i "
                   "%}{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(render("{% for x in [1,2,3] if x != 2 %}{{ loop.index }}/{{ loop.length }}{{ ',' if "
                   "not loop.last }}{% else %}none{% endfor %}"),
            "1/2,2/2");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% "
                   "continue %}{% endif %}{{ x }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% macro m(a, b=2) %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, b=3) }}"),
            "[12][13]");
  EXPECT_EQ(render("{{ ' a b  '.split() }} {{ 'a,b'.split(',') }} {{ '  x '.strip() }}{{ "
                   "'xyx'.strip('x') }}"),
            "['a', 'b'] ['a', 'b'] xy");
  EXPECT_EQ(
      render(
          "{{ m | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}",
          Json::parse(
              R"({"m": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "c"}]})")),
      "a, c");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2024");
}

TEST(ChatTemplateErrors, NameTheTemplatesMessageAndPlace) {
  EXPECT_THAT(
      testing::error_of([] { (void)render("x\n  {{ raise_exception('roles must alternate') }}"); }),
      HasSubstr("chat template 'test' line 2:6 raised: roles must alternate"));
  EXPECT_THAT(testing::error_of([] { (void)render("{{ u.x }}"); }), HasSubstr("'u' is undefined"));
  EXPECT_THAT(testing::error_of([] { (void)render("{{ 'a' + 1 }}"); }), HasSubstr("line 1:8"));
  EXPECT_THAT(testing::error_of([] { (void)render("{{ 'É'|lower }}"); }),
              HasSubstr("beyond ASCII is not implemented"));
}

TEST(ChatTemplateRefusals, NameTheConstructAndItsPlace) {
  const auto refused = [](std::string_view source) {
    return testing::error_of([&] { (void)ChatTemplate::parse(source, "t"); });
  };
  EXPECT_THAT(refused("ab\n  {% include 'x.jinja' %}"),
              HasSubstr("line 2:3: the statement 'include' is not implemented"));
  EXPECT_THAT(refused("{% extends 'base' %}"), HasSubstr("'extends' is not implemented"));
  EXPECT_THAT(refused("{% raw %}{{ x }}{% endraw %}"), HasSubstr("'raw' is not implemented"));
  EXPECT_THAT(refused("{% call m() %}x{% endcall %}"), HasSubstr("'call' is not implemented"));
  EXPECT_THAT(refused("{{ x | wordwrap }}"),
              HasSubstr("line 1:8: the filter 'wordwrap' is not implemented"));
  EXPECT_THAT(refused("{{ x is escaped }}"), HasSubstr("the test 'escaped' is not implemented"));
  EXPECT_THAT(refused("{% for x in y recursive %}{% endfor %}"),
              HasSubstr("recursive loops are not implemented"));
  EXPECT_THAT(refused("{% macro m() %}{% generation %}x{% endgeneration %}{% endmacro %}"),
              HasSubstr("a generation block inside a macro"));
  EXPECT_THAT(refused("{{ '%s' % x }}"), HasSubstr("<no error>"));  // refused when rendered
  EXPECT_THAT(testing::error_of([] { (void)render("{{ '%s' % 'x' }}"); }),
              HasSubstr("string formatting with '%' is not implemented"));
  EXPECT_THAT(refused("{% break %}"), HasSubstr("'break' outside a loop"));
  EXPECT_THAT(refused("{% endif %}"), HasSubstr("'endif' without its opening block"));
}

TEST(ChatTemplateHostile, UnterminatedTagsAreRefused) {
  const auto refused = [](std::string_view source) {
    return testing::error_of([&] { (void)ChatTemplate::parse(source, "t"); });
  };
  EXPECT_THAT(refused("a {{ x"), HasSubstr("line 1:3: unterminated '{{' tag"));
  EXPECT_THAT(refused("a\n{% if x"), HasSubstr("line 2:1: unterminated '{%' tag"));
  EXPECT_THAT(refused("{# c"), HasSubstr("unterminated comment"));
  EXPECT_THAT(refused("{{ 'abc }}"), HasSubstr("unterminated string"));
  EXPECT_THAT(refused("{% if x %}never closed"), HasSubstr("expected 'elif'"));
  EXPECT_THAT(refused("{{ (1 }}"), HasSubstr("line 1:7: unexpected '}'"));
}

TEST(ChatTemplateHostile, BoundsStopWhatWouldHangOrExhaustMemory) {
  const auto start = std::chrono::steady_clock::now();
  std::string nested_ifs;
  for (int i = 0; i < 300; ++i) nested_ifs += "{% if true %}";
  EXPECT_THAT(testing::error_of([&] { (void)ChatTemplate::parse(nested_ifs, "t"); }),
              HasSubstr("blocks nest deeper than 200"));
  EXPECT_THAT(testing::error_of([] {
                (void)ChatTemplate::parse(
                    "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", "t");
              }),
              HasSubstr("expressions nest deeper than 200"));
  EXPECT_THAT(testing::error_of([] {
                (void)ChatTemplate::parse("{{ " + std::string(100000, '-') + "1 }}", "t");
              }),
              HasSubstr("nest deeper"));
  EXPECT_THAT(testing::error_of([] { (void)render("{% for i in range(10**12) %}{% endfor %}"); }),
              HasSubstr("MAX_RANGE"));
  EXPECT_THAT(
      testing::error_of([] {
        (void)render(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
      }),
      HasSubstr("loops ran more than"));
  EXPECT_THAT(testing::error_of([] { (void)render("{{ 'x' * 1000000000 }}"); }),
              HasSubstr("exceeds the bound"));
  EXPECT_THAT(testing::error_of([] {
                (void)render("{% for i in range(100000) %}{{ 'x' * 1000000 }}{% endfor %}");
              }),
              HasSubstr("the output exceeds the bound of 67108864 bytes"));
  EXPECT_THAT(testing::error_of([] {
                (void)render(
                    "{% set ns = namespace(s='xxxxxxxxxx') %}{% for i in range(30) %}{% set ns.s = "
                    "ns.s ~ ns.s %}{% endfor %}");
              }),
              HasSubstr("exceeds the bound"));
  EXPECT_THAT(testing::error_of(
                  [] { (void)render("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}"); }),
              HasSubstr("macros call each other deeper than 64"));
  EXPECT_THAT(testing::error_of([] { (void)ChatTemplate::parse(std::string(2 << 20, 'x'), "t"); }),
              HasSubstr("more than the bound"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(ChatTemplateGeneration, RecordsTheBytesOfEachBlock) {
  const ChatTemplate chat = ChatTemplate::parse(
      "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ "
      "m.content }}!{% endgeneration %}"
      "{% else %}{{ m.content }}{% endif %}{% endfor %}",
      "t");
  EXPECT_TRUE(chat.has_generation_blocks());
  const RenderedChat out = chat.render_with_generation_ranges(Json::parse(
      R"({"messages": [{"role": "user", "content": "é"}, {"role": "assistant", "content": "ok"}]})"));
  EXPECT_EQ(out.text, "<user>é<assistant>ok!");
  ASSERT_EQ(out.generation.size(), 1u);
  EXPECT_EQ(
      out.text.substr(out.generation[0].begin, out.generation[0].end - out.generation[0].begin),
      "ok!");
}

TEST(ChatTemplateFolder, ReadsTheTemplateAndSpecialTokensWhereTransformersDoes) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("chat_template_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  EXPECT_FALSE(chat_template_of_folder(folder).has_value());
  std::ofstream(folder / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
            "chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}]})";
  const std::optional<ChatTemplate> chat = chat_template_of_folder(folder);
  ASSERT_TRUE(chat.has_value());
  const Json tokens = special_tokens_of_folder(folder);
  EXPECT_EQ(tokens.dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
  EXPECT_EQ(chat->render(
                chat_context(Json::parse(R"([{"role": "user", "content": "hi"}])"), false, tokens)),
            "<s>hi");
  std::ofstream(folder / "chat_template.jinja") << "jinja file\n";
  EXPECT_EQ(chat_template_of_folder(folder)->render(Json::object()), "jinja file");
  std::ofstream(folder / "chat_template.jinja") << "{{ x";
  EXPECT_THAT(testing::error_of([&] { (void)chat_template_of_folder(folder); }),
              HasSubstr("chat_template.jinja' line 1:1"));
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace shardwise::text

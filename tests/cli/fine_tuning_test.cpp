// Fine-tuning from JSON Lines as a user runs it: `train --data chat.jsonl` (the loss on the
// assistant's tokens) gives one rank's losses on every layout, GPT and Llama, held-out losses
// included; prompt/completion and text lines train too; and what cannot be read is refused in one
// line naming the file, the line and what is wrong, before any step.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_command.hpp"
#include "test_files.hpp"

namespace shardwise::cli {
namespace {

using shardwise::testing::test_path;
using testing::expect_bad_input;
using testing::json_lines;
using testing::run_command;
using testing::source_path;

std::string write(const std::string& name, const std::string& bytes) {
  return shardwise::testing::write_test_file(name, bytes);
}

// A tokenizer folder: the SmolLM2-style fixture tokenizer (603 tokens) and SmolLM2-Instruct's
// chat template, its end of turn the end-of-sequence token.
std::string tokenizer_folder() {
  const std::string folder = test_path("tokenizer");
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(source_path("tests/text/fixtures/smollm2.tokenizer.json"),
                             folder + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(source_path("tests/text/fixtures/chat/smollm2_135m_instruct.json"));
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const nlohmann::json config{{"chat_template", fixture["template"]},
                              {"eos_token", "<|im_end|>"},
                              {"bos_token", "<|im_start|>"}};
  std::ofstream(folder + "/tokenizer_config.json") << config.dump();
  return folder + "/tokenizer.json";
}

const char* const kThings[] = {"cats", "ships", "stars", "bells", "trees"};

std::string chat_lines(int count, int seed) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    const int a = (i * 7 + seed) % 40, b = (i * 13 + seed) % 30;
    const std::string thing = kThings[i % 5];
    nlohmann::json messages = nlohmann::json::array();
    if (i % 3 == 0) messages.push_back({{"role", "system"}, {"content", "You count."}});
    messages.push_back({{"role", "user"}, {"content", "How many " + thing + "?"}});
    messages.push_back({{"role", "assistant"}, {"content", std::to_string(a) + " " + thing}});
    if (i % 2 == 0) {
      messages.push_back({{"role", "user"}, {"content", "And more?"}});
      messages.push_back({{"role", "assistant"}, {"content", std::to_string(a + b) + "."}});
    }
    text += nlohmann::json{{"messages", messages}, {"id", i}}.dump() + "\n";
  }
  return text;
}

std::string gpt_model() {
  return write("gpt.json",
               R"({"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 96, "vocab_size": 640})");
}

std::string llama_model() {
  return write("llama.json", R"({"family": "llama", "num_hidden_layers": 2, "hidden_size": 32,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64,
    "vocab_size": 640, "max_position_embeddings": 96})");
}

std::vector<std::string> fine_tune(const std::string& model, const std::string& data,
                                   std::vector<std::string> extra) {
  std::vector<std::string> args{
      "train",   "--model",      model,     "--data", data,    "--tokenizer", tokenizer_folder(),
      "--steps", "10",           "--batch", "8",      "--seq", "96",          "--lr",
      "3e-3",    "--eval-every", "5",       "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The loss and held-out loss of each step.
std::vector<std::pair<double, double>> losses(const testing::Result& r) {
  std::vector<std::pair<double, double>> out;
  for (const auto& line : json_lines(r.out)) {
    if (!line.contains("loss")) continue;
    out.emplace_back(line["loss"].get<double>(),
                     line.contains("val_loss") ? line["val_loss"].get<double>() : -1.0);
  }
  return out;
}

void expect_every_layout_matches(const std::string& model,
                                 const std::vector<std::vector<std::string>>& layouts) {
  const std::string data = write("chat.jsonl", chat_lines(60, 3));
  const testing::Result one_run = run_command(fine_tune(model, data, {}));
  ASSERT_EQ(one_run.status, 0) << one_run.err;
  const auto one = losses(one_run);
  ASSERT_EQ(one.size(), 10U);
  // It learns the assistant's tokens, and the held-out ones with them.
  EXPECT_LT(one[9].first, one[0].first - 0.5);
  EXPECT_LT(one[9].second, one[4].second);
  for (const auto& layout : layouts) {
    std::string where;
    for (const std::string& flag : layout) where += flag + " ";
    const testing::Result r = run_command(fine_tune(model, data, layout));
    ASSERT_EQ(r.status, 0) << where << r.err;
    const auto many = losses(r);
    ASSERT_EQ(many.size(), one.size()) << where;
    for (std::size_t s = 0; s < one.size(); ++s) {
      EXPECT_NEAR(many[s].first, one[s].first, 1e-5 * one[s].first) << where << "step " << s + 1;
      EXPECT_NEAR(many[s].second, one[s].second, 1e-5 * std::abs(one[s].second))
          << where << "held-out, step " << s + 1;
    }
  }
}

TEST(FineTuning, ChatExamplesTrainTheGptAlikeOnEveryLayout) {
  expect_every_layout_matches(
      gpt_model(), {{"--mesh", "data=2"},
                    {"--mesh", "fsdp=2", "--zero", "3"},
                    {"--mesh", "model=2"},  // the vocabulary-parallel head ignores targets too
                    {"--mesh", "model=2", "--sequence-parallel"},
                    {"--mesh", "pipeline=2", "--microbatches", "2"},
                    {"--mesh", "data=2,fsdp=2,model=2,pipeline=2", "--zero", "3"}});
}

TEST(FineTuning, ChatExamplesTrainTheLlamaAlikeOnEveryLayout) {
  expect_every_layout_matches(
      llama_model(), {{"--mesh", "data=2,fsdp=2", "--zero", "2"},
                      {"--mesh", "model=2", "--sequence-parallel"},
                      {"--mesh", "pipeline=2", "--schedule", "gpipe", "--microbatches", "4"},
                      {"--mesh", "fsdp=2,model=2", "--zero", "3"}});
}

TEST(FineTuning, PromptCompletionAndTextLinesTrainAndTheRunSaysWhatItPadded) {
  std::string pairs, texts;
  for (int i = 0; i < 40; ++i) {
    const std::string thing = kThings[i % 5];
    pairs += nlohmann::json{{"prompt", "Count " + thing + ":"},
                            {"completion", " " + std::to_string(i) + " " + thing}}
                 .dump() +
             "\n";
    texts += nlohmann::json{{"text", "Count " + thing + ": " + std::to_string(i)}}.dump() + "\n";
  }
  for (const std::string& data : {write("pairs.jsonl", pairs), write("texts.jsonl", texts)}) {
    const testing::Result r = run_command(fine_tune(gpt_model(), data, {}));
    ASSERT_EQ(r.status, 0) << data << r.err;
    const auto steps = losses(r);
    ASSERT_EQ(steps.size(), 10U);
    EXPECT_LT(steps[9].first, steps[0].first) << data;
  }
  // Without --json the run says what the rows hold.
  std::vector<std::string> args = fine_tune(gpt_model(), write("pairs.jsonl", pairs), {});
  args.pop_back();
  const testing::Result r = run_command(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("36 training examples in rows of 96 positions"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("4 held-out examples"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("% of the positions"));
}

TEST(FineTuning, WhatCannotBeReadIsRefusedNamingTheLine) {
  const std::string model = gpt_model();
  const std::string good = chat_lines(4, 1);
  // No tokenizer: examples are text.
  expect_bad_input({"train", "--model", model, "--data", write("chat.jsonl", good)},
                   "--data is JSON Lines of examples, which are text: give the model's tokenizer");
  const auto refused = [&](const std::string& lines, const std::string& message) {
    expect_bad_input(fine_tune(model, write("bad.jsonl", lines), {}), message);
  };
  refused(good + "{\"messages\": [\n", "bad.jsonl' line 5 is not JSON");
  refused(good + "[1, 2]\n", "line 5: is array; expected an object holding \"text\"");
  refused(good + "{\"prompt\": \"a\", \"completion\": \"b\"}\n",
          "line 5: is not of the kind the first line is");
  refused("{\"txt\": \"a\"}\n", "line 1: holds \"txt\"; expected \"text\"");
  refused("{\"text\": 5}\n", "line 1: \"text\" is number; expected a string");
  refused("{\"text\": \"a\", \"text\": \"b\"}\n", "has the key \"text\" twice");
  refused("{\"messages\": []}\n", "\"messages\" is an empty list");
  refused("{\"messages\": [{\"content\": \"hi\"}]}\n", "\"messages\"[0] is not a message");
  refused("{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}], \"completion\": \"b\"}\n",
          "one a list of messages and one not");
  refused("\n\n", "holds no example");
  refused("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"tools\": 5}\n",
          "\"tools\" is number; expected a list of tools");
  refused(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], "
      "\"chat_template_kwargs\": []}\n",
      "\"chat_template_kwargs\" is array; expected an object");
  // Conversations need a chat template: the folder's tokenizer_config.json without one.
  const std::string bare = test_path("bare");
  std::filesystem::create_directories(bare);
  std::filesystem::copy_file(source_path("tests/text/fixtures/smollm2.tokenizer.json"),
                             bare + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  expect_bad_input({"train", "--model", model, "--data", write("chat.jsonl", good), "--tokenizer",
                    bare + "/tokenizer.json"},
                   "line 1: a conversation needs a chat template");
  // A line too long to be an example, a FIFO and a device: refused, never read without end.
  expect_bad_input(fine_tune(model, write("long.jsonl", std::string((17U << 20), 'x')), {}),
                   "long.jsonl' line 1 is longer than 16 MiB");
  const std::string fifo = test_path("fifo.jsonl");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_bad_input(fine_tune(model, fifo, {}), "not a readable regular file");
  expect_bad_input(fine_tune(model, "/dev/zero", {"--data-format", "jsonl"}),
                   "not a readable regular file");
  std::filesystem::remove(fifo);
}

}  // namespace
}  // namespace shardwise::cli

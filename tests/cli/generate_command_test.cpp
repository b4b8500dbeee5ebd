// `shardwise generate` as a user runs it: text from a checkpoint, a --save folder and an export,
// one text on every 'model' degree for greedy and seeded sampling, the prompt as text, a file or
// ids, `ckpt loss` on the same sources, and hostile flags refused in one line naming the flag.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "run_command.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using testing::run_command;
using testing::source_path;

// A small GPT trained for a few steps, saved twice (its --save folder and the newest step).
class GenerateCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    folder_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        ("shardwise-generate-" + std::to_string(::getpid())));
    std::filesystem::remove_all(*folder_);
    std::filesystem::create_directories(*folder_);
    std::string text;
    for (int i = 0; i < 20; ++i) text += "The quick brown fox jumps over the lazy dog. ";
    std::ofstream(path("text.txt")) << text;
    // The built-in corpus: the model learns to continue its sentences in 40 steps.
    const testing::Result r = run_command(
        {"train", "--model", source_path("examples/models/gpt_first_run.json"), "--steps", "40",
         "--batch", "8", "--seq", "64", "--lr", "1e-2", "--save", save(), "--save-every", "20"});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*folder_);
    delete folder_;
  }
  static std::string save() { return (*folder_ / "save").string(); }
  static std::string newest() { return (*folder_ / "save" / "step-00000040").string(); }
  static std::string path(const std::string& name) { return (*folder_ / name).string(); }

  static nlohmann::json generate(std::vector<std::string> args) {
    args.insert(args.begin(), "generate");
    args.push_back("--json");
    const testing::Result r = run_command(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  }

  static std::filesystem::path* folder_;
};
std::filesystem::path* GenerateCommand::folder_ = nullptr;

TEST_F(GenerateCommand, OneTextOnEveryModelDegreeFromEverySource) {
  const nlohmann::json one = generate({newest(), "--prompt", "The ", "--max-new-tokens", "40"});
  ASSERT_EQ(one["ids"].size(), 40U);
  EXPECT_EQ(one["prompt_ids"], nlohmann::json({84, 104, 101, 32}));
  EXPECT_EQ(one["stop"], "max-new-tokens");
  EXPECT_EQ(one["tokenizer"], "bytes");
  std::string bytes;
  for (const auto& id : one["ids"]) bytes += static_cast<char>(id.get<int>());
  EXPECT_EQ(one["text"], bytes);
  for (const char* mesh : {"model=2", "model=4"}) {
    EXPECT_EQ(
        generate({newest(), "--prompt", "The ", "--max-new-tokens", "40", "--mesh", mesh})["ids"],
        one["ids"])
        << mesh;
  }
  // The --save folder's newest, the prompt as ids and from a file.
  EXPECT_EQ(generate({save(), "--prompt", "The ", "--max-new-tokens", "40"})["ids"], one["ids"]);
  EXPECT_EQ(generate({newest(), "--prompt-ids", "84,104,101,32", "--max-new-tokens", "40"})["ids"],
            one["ids"]);
  std::ofstream(path("prompt.txt")) << "The ";
  EXPECT_EQ(
      generate({newest(), "--prompt-file", path("prompt.txt"), "--max-new-tokens", "40"})["ids"],
      one["ids"]);
  // The older checkpoint is another model.
  EXPECT_NE(generate({(*folder_ / "save" / "step-00000020").string(), "--prompt", "The ",
                      "--max-new-tokens", "40"})["ids"],
            one["ids"]);
  // Seeded draws: one text per seed on every degree, another for another seed.
  const std::vector<std::string> sampled{newest(), "--prompt",      "The ", "--max-new-tokens",
                                         "40",     "--temperature", "1.2",  "--top-k",
                                         "50",     "--top-p",       "0.95"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = sampled;
    args.insert(args.end(), extra.begin(), extra.end());
    return generate(args)["ids"];
  };
  const nlohmann::json seeded = with({"--seed", "7"});
  EXPECT_EQ(with({"--seed", "7", "--mesh", "model=2"}), seeded);
  EXPECT_NE(with({"--seed", "8"}), seeded);
  EXPECT_NE(seeded, one["ids"]);
  // A stop id ends the text there, kept among the ids and left out of the text.
  const int first = one["ids"][3].get<int>();
  const nlohmann::json stopped = generate({newest(), "--prompt", "The ", "--max-new-tokens", "40",
                                           "--stop-ids", std::to_string(first)});
  EXPECT_EQ(stopped["stop"], "stop-token");
  EXPECT_EQ(stopped["ids"].back(), first);
  EXPECT_LE(stopped["ids"].size(), 4U);
  // The context ends a text: 128 positions, a prompt of 4.
  const nlohmann::json full = generate({newest(), "--prompt", "The ", "--max-new-tokens", "500"});
  EXPECT_EQ(full["stop"], "context");
  EXPECT_EQ(full["ids"].size(), 125U);
}

TEST_F(GenerateCommand, TextModeWritesThePromptItsContinuationAndOneLineOfFigures) {
  const testing::Result r =
      run_command({"generate", newest(), "--prompt", "The ", "--max-new-tokens", "10"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("The ", 0), 0U) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("[10 new tokens, stopped at max-new-tokens; prompt 4"));
}

TEST_F(GenerateCommand, CkptLossReadsAnExportAsItReadsTheCheckpoint) {
  const testing::Result exported =
      run_command({"ckpt", "export", newest(), "--format", "hf-gpt2", "--out", path("hf")});
  ASSERT_EQ(exported.status, 0) << exported.err;
  const std::string data = path("text.txt");
  const testing::Result a = run_command({"ckpt", "loss", newest(), "--data", data, "--json"});
  const testing::Result b = run_command({"ckpt", "loss", path("hf"), "--data", data, "--json"});
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["loss"], jb["loss"]);
  EXPECT_EQ(ja["step"], 40);
  EXPECT_TRUE(jb["step"].is_null());
  // And generate from the export gives the checkpoint's text.
  EXPECT_EQ(generate({path("hf"), "--prompt", "The ", "--max-new-tokens", "20"})["ids"],
            generate({newest(), "--prompt", "The ", "--max-new-tokens", "20"})["ids"]);
}

// bf16: the products on bf16 roundings. Its greedy text is one text on every model degree; the
// trained model's loss in bf16 is float32's within 1% and not float32's; and a bf16 run resumes
// the float32 checkpoint (its masters are float32) and trains on.
TEST_F(GenerateCommand, Bf16GeneratesOneTextOnEveryDegreeAndReadsFloat32Checkpoints) {
  const std::vector<std::string> greedy{newest(), "--prompt",    "The ", "--max-new-tokens",
                                        "40",     "--precision", "bf16"};
  const nlohmann::json one = generate(greedy);
  ASSERT_EQ(one["ids"].size(), 40U);
  for (const char* mesh : {"model=2", "model=4"}) {
    std::vector<std::string> args = greedy;
    args.insert(args.end(), {"--mesh", mesh});
    EXPECT_EQ(generate(args)["ids"], one["ids"]) << mesh;
  }
  const std::string data = path("text.txt");
  const testing::Result fp32 = run_command({"ckpt", "loss", newest(), "--data", data, "--json"});
  const testing::Result bf16 =
      run_command({"ckpt", "loss", newest(), "--data", data, "--json", "--precision", "bf16"});
  ASSERT_EQ(fp32.status, 0) << fp32.err;
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  const double a = nlohmann::json::parse(fp32.out)["loss"].get<double>();
  const double b = nlohmann::json::parse(bf16.out)["loss"].get<double>();
  EXPECT_NEAR(b, a, 1e-2 * a);
  EXPECT_NE(b, a);
  // Exported in bfloat16: half the bytes, read back with the loss of the checkpoint within 1%.
  const testing::Result exported = run_command({"ckpt", "export", newest(), "--format", "hf-gpt2",
                                                "--out", path("hf16"), "--dtype", "bfloat16"});
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_THAT(exported.out, ::testing::HasSubstr("tensors in bfloat16"));
  const testing::Result from_export =
      run_command({"ckpt", "loss", path("hf16"), "--data", data, "--json"});
  ASSERT_EQ(from_export.status, 0) << from_export.err;
  EXPECT_NEAR(nlohmann::json::parse(from_export.out)["loss"].get<double>(), a, 1e-2 * a);
  expect_bad_input(
      {"ckpt", "export", newest(), "--format", "hf-gpt2", "--out", path("hf8"), "--dtype", "int8"},
      "--dtype is 'int8'; expected fp32 or bf16");
  EXPECT_FALSE(std::filesystem::exists(path("hf8")));
  // Resumed in bf16 and in float32 from the float32 checkpoint: the same step, losses within 2%.
  std::vector<double> first_losses;
  for (const char* precision : {"fp32", "bf16"}) {
    const testing::Result resumed =
        run_command({"train", "--model", source_path("examples/models/gpt_first_run.json"),
                     "--steps", "44", "--batch", "8", "--seq", "64", "--lr", "1e-2", "--resume",
                     newest(), "--precision", precision, "--json"});
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    const auto lines = testing::json_lines(resumed.out);
    ASSERT_EQ(lines.size(), 5U) << precision;
    EXPECT_EQ(lines.front()["step"], 41) << precision;
    first_losses.push_back(lines.front()["loss"].get<double>());
  }
  EXPECT_NEAR(first_losses[1], first_losses[0], 2e-2 * first_losses[0]);
  expect_bad_input({"generate", newest(), "--prompt", "The ", "--precision", "half"},
                   "--precision is 'half'; expected fp32 or bf16");
  expect_bad_input({"ckpt", "loss", newest(), "--data", data, "--precision", "half"},
                   "--precision is 'half'; expected fp32 or bf16");
}

// A model of 640 tokens with a byte-level BPE tokenizer.json of 600 (the gpt2 fixture, made
// with the tokenizers library): the prompt is encoded as the library encoded it
// (tests/text/fixtures/gpt2.expected.json), from --tokenizer and from a Hugging Face folder's
// tokenizer.json alike, and the text is the tokenizer's decoding, ids past its vocabulary shown
// as [id].
TEST_F(GenerateCommand, ATokenizerJsonEncodesThePromptAsTheTokenizersLibrary) {
  const std::string tokenizer = source_path("tests/text/fixtures/gpt2.tokenizer.json");
  std::ofstream(path("bpe_model.json"))
      << R"({"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 64, "vocab_size": 640})";
  const testing::Result trained =
      run_command({"train", "--model", path("bpe_model.json"), "--steps", "1", "--batch", "2",
                   "--seq", "16", "--save", path("bpe_save")});
  ASSERT_EQ(trained.status, 0) << trained.err;
  const testing::Result exported = run_command(
      {"ckpt", "export", path("bpe_save"), "--format", "hf-gpt2", "--out", path("bpe_hf")});
  ASSERT_EQ(exported.status, 0) << exported.err;
  std::filesystem::copy_file(tokenizer, path("bpe_hf") + "/tokenizer.json");

  std::ifstream expected_file(source_path("tests/text/fixtures/gpt2.expected.json"));
  const nlohmann::json expected = nlohmann::json::parse(expected_file);
  const text::Tokenizer bpe = text::Tokenizer::from_file(tokenizer);
  int checked = 0, past_vocabulary = 0;
  for (const nlohmann::json& sample : expected["encode"]) {
    const std::string prompt = sample["text"];
    if (prompt.empty() || sample["ids"].size() > 40 || checked == 12) continue;
    for (const std::vector<std::string>& source :
         {std::vector<std::string>{path("bpe_save"), "--tokenizer", tokenizer},
          std::vector<std::string>{path("bpe_hf")}}) {
      std::vector<std::string> args = source;
      args.insert(args.end(), {"--prompt", prompt, "--max-new-tokens", "8", "--temperature", "1",
                               "--seed", std::to_string(checked), "--stop-ids", "none"});
      const nlohmann::json got = generate(args);
      EXPECT_EQ(got["prompt_ids"], sample["ids"]) << prompt;
      EXPECT_EQ(got["tokenizer"].get<std::string>().rfind("tokenizer.json", 0), 0U);
      std::string text;
      std::vector<std::int32_t> run;
      for (const nlohmann::json& id : got["ids"]) {
        if (id.get<std::int32_t>() < 600) {
          run.push_back(id.get<std::int32_t>());
          continue;
        }
        text += bpe.decode(run) + "[" + std::to_string(id.get<int>()) + "]";
        run.clear();
        ++past_vocabulary;
      }
      EXPECT_EQ(got["text"], text + bpe.decode(run)) << prompt;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 12);
  EXPECT_GT(past_vocabulary, 0) << "no id past the tokenizer's vocabulary was drawn";
  // A tokenizer of more tokens than the model has is refused naming both sizes.
  expect_bad_input({"generate", newest(), "--prompt", "The ", "--tokenizer", tokenizer},
                   "has 600 tokens");
}

TEST_F(GenerateCommand, RefusesHostileFlagsInOneLineNamingTheFlag) {
  const auto bad = [&](std::vector<std::string> extra, const std::string& message) {
    std::vector<std::string> args{"generate", newest(), "--prompt", "The "};
    args.insert(args.end(), extra.begin(), extra.end());
    expect_bad_input(args, message);
  };
  bad({"--temperature", "nan"}, "--temperature");
  bad({"--temperature", "-1"}, "--temperature is -1");
  bad({"--temperature", "1e999"}, "--temperature");
  bad({"--top-p", "0"}, "--top-p is 0");
  bad({"--top-p", "1.5"}, "--top-p is 1.5");
  bad({"--top-k", "-1"}, "--top-k");
  bad({"--max-new-tokens", "-1"}, "--max-new-tokens");
  bad({"--max-new-tokens", "9223372036854775808"}, "--max-new-tokens");
  bad({"--seed", "-3"}, "--seed");
  bad({"--stop-ids", "256"}, "--stop-ids");
  bad({"--mesh", "data=2"}, "'data' has size 2");
  bad({"--mesh", "model=3"}, "the model degree 3 does not divide the 4 attention heads");
  bad({"--prompt-ids", "1"}, "give the prompt once");
  bad({"--tokenizer", "/dev/zero"}, "/dev/zero");
  bad({"--tokenizer", ""}, "--tokenizer is empty");
  bad({"--tokenizer", path("")}, "--tokenizer");  // the folder itself
  expect_bad_input({"generate", newest()}, "give the prompt once");
  expect_bad_input({"generate", newest(), "--prompt", ""}, "the prompt is empty");
  expect_bad_input({"generate", newest(), "--prompt", std::string(128, 'x')}, "leaves no room");
  expect_bad_input({"generate", newest(), "--prompt-ids", "256"}, "--prompt-ids");
  expect_bad_input({"generate", newest(), "--prompt-ids", "-1"}, "--prompt-ids");
  expect_bad_input({"generate", newest(), "--prompt-ids", "1,,2"}, "--prompt-ids");
  expect_bad_input({"generate", newest(), "--prompt-ids", ""}, "--prompt-ids");
  expect_bad_input({"generate", newest(), "--prompt-file", "/dev/zero"}, "--prompt-file");
  expect_bad_input({"generate", path("missing"), "--prompt", "a"}, "does not exist");
  expect_bad_input({"generate", "/dev/zero", "--prompt", "a"}, "is a file");
  expect_bad_input({"generate", path("text.txt"), "--prompt", "a"}, "is a file");
}

}  // namespace
}  // namespace shardwise::cli

// Text reaches a model through its tokenizer: `data prepare` writes the tokenizer's ids of a text,
// `train --tokenizer` trains on exactly those ids (the same losses as the token file), `ckpt
// loss` and `generate --prompt-file` encode with it, and text given to a model of another
// vocabulary than bytes' with no tokenizer is refused naming both.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_command.hpp"
#include "shardwise/text/tokenizer.hpp"
#include "test_files.hpp"

namespace shardwise::cli {
namespace {

using shardwise::testing::test_path;
using testing::expect_bad_input;
using testing::json_lines;
using testing::run_command;
using testing::source_path;

const std::string kTokenizer = source_path("tests/text/fixtures/gpt2.tokenizer.json");

std::string write(const std::string& name, const std::string& bytes) {
  return shardwise::testing::write_test_file(name, bytes);
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string some_text() {
  std::string text;
  for (int i = 0; text.size() < 30000; ++i) {
    text += "The licensee may copy entry " + std::to_string(i * 7919 % 4093) + " of the work, ";
    if (i % 3 == 2) text += "\nAnd ";
  }
  return text;
}

// A GPT whose vocabulary holds the fixture tokenizer's 600-odd tokens.
std::string wide_model() {
  return write("gpt_640.json",
               R"({"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 640})");
}

std::vector<double> losses(const std::vector<std::string>& data_args) {
  std::vector<std::string> args{"train", "--model", wide_model(), "--steps",
                                "3",     "--batch", "4",          "--json"};
  args.insert(args.end(), data_args.begin(), data_args.end());
  const testing::Result r = run_command(args);
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<double> out;
  for (const auto& line : json_lines(r.out)) {
    if (line.contains("loss")) out.push_back(line["loss"].get<double>());
  }
  return out;
}

TEST(TextData, PrepareWritesTheTokenizersIdsAndTrainingOnTextEqualsTrainingOnThem) {
  const std::string text_path = write("licensee.txt", some_text());
  const std::string ids_path = test_path("licensee.u16");
  std::filesystem::remove(ids_path);
  const testing::Result made =
      run_command({"data", "prepare", text_path, "--tokenizer", kTokenizer, "--out", ids_path});
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_THAT(made.out, ::testing::HasSubstr("(tokens-u16)"));
  const std::vector<std::int32_t> expected =
      text::Tokenizer::from_file(kTokenizer).encode(some_text());
  const std::string bytes = read(ids_path);
  ASSERT_EQ(bytes.size(), expected.size() * 2);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const int id = static_cast<unsigned char>(bytes[2 * i]) |
                   static_cast<unsigned char>(bytes[2 * i + 1]) << 8;
    ASSERT_EQ(id, expected[i]) << "token " << i;
  }
  // The same ids, read from the text through the tokenizer or from the token file.
  const std::vector<double> from_text = losses({"--data", text_path, "--tokenizer", kTokenizer});
  const std::vector<double> from_ids = losses({"--data", ids_path, "--data-format", "tokens-u16"});
  ASSERT_EQ(from_text.size(), 3U);
  EXPECT_EQ(from_text, from_ids);
  // An existing file is replaced only when asked.
  expect_bad_input({"data", "prepare", text_path, "--tokenizer", kTokenizer, "--out", ids_path},
                   "exists");
  EXPECT_EQ(run_command({"data", "prepare", text_path, "--tokenizer", kTokenizer, "--out", ids_path,
                         "--format", "tokens-u32", "--force"})
                .status,
            0);
  EXPECT_EQ(read(ids_path).size(), expected.size() * 4);
}

TEST(TextData, TextForAModelOfAnotherVocabularyNeedsItsTokenizer) {
  const std::string text_path = write("plain.txt", some_text());
  expect_bad_input({"train", "--model", wide_model(), "--data", text_path, "--steps", "1"},
                   "--data is text and a GPT of n_layer 2, n_head 2, n_embd 32, block_size 32, "
                   "vocab_size 640 has a vocabulary of 640 tokens: text is read as bytes for a "
                   "model of 256 tokens alone; give the model's tokenizer");
  // A tokenizer larger than the model, a tokenizer for ids, a tokenizer without data: each named.
  expect_bad_input({"train", "--model", "tiny", "--data", text_path, "--tokenizer", kTokenizer},
                   "has a vocabulary of 256");
  expect_bad_input({"train", "--model", wide_model(), "--data", text_path, "--data-format",
                    "tokens-u16", "--tokenizer", kTokenizer},
                   "--tokenizer encodes text, and --data-format tokens-u16 is ids already");
  expect_bad_input({"train", "--model", wide_model(), "--tokenizer", kTokenizer},
                   "--tokenizer encodes --data, which is not given");
  expect_bad_input({"train", "--model", wide_model(), "--data", text_path, "--tokenizer", ""},
                   "--tokenizer is empty");
  expect_bad_input(
      {"train", "--model", wide_model(), "--data", "/dev/zero", "--tokenizer", kTokenizer},
      "is not a regular file");
  expect_bad_input({"train", "--model", wide_model(), "--data", write("latin1.txt", "caf\xe9"),
                    "--tokenizer", kTokenizer},
                   "is not UTF-8 text: byte 0xe9 at offset 3");
  // A 256-token model still reads text as bytes.
  EXPECT_EQ(run_command({"train", "--model", "tiny", "--data", text_path, "--steps", "1", "--batch",
                         "2", "--seq", "16"})
                .status,
            0);
}

TEST(TextData, LossAndPromptFilesGoThroughTheTokenizer) {
  const std::string text_path = write("loss.txt", some_text());
  const std::string save = test_path("text_data_run");
  std::filesystem::remove_all(save);
  ASSERT_EQ(run_command({"train", "--model", wide_model(), "--data", text_path, "--tokenizer",
                         kTokenizer, "--steps", "2", "--batch", "2", "--save", save})
                .status,
            0);
  // The loss of the text through the tokenizer equals the loss of its token file.
  const std::string ids_path = test_path("loss.u32");
  std::filesystem::remove(ids_path);
  ASSERT_EQ(run_command({"data", "prepare", text_path, "--tokenizer", kTokenizer, "--out", ids_path,
                         "--format", "tokens-u32"})
                .status,
            0);
  const testing::Result from_text =
      run_command({"ckpt", "loss", save, "--data", text_path, "--tokenizer", kTokenizer, "--json"});
  const testing::Result from_ids = run_command(
      {"ckpt", "loss", save, "--data", ids_path, "--data-format", "tokens-u32", "--json"});
  ASSERT_EQ(from_text.status, 0) << from_text.err;
  ASSERT_EQ(from_ids.status, 0) << from_ids.err;
  EXPECT_EQ(json_lines(from_text.out)[0]["loss"], json_lines(from_ids.out)[0]["loss"]);
  expect_bad_input({"ckpt", "loss", save, "--data", text_path}, "is text and checkpoint '");
  // A prompt file is read only as far as the context: a long file is refused at once, and a
  // file such as /proc/self/status (size 0) is read to its end.
  expect_bad_input({"generate", save, "--tokenizer", kTokenizer, "--prompt-file", text_path},
                   "the prompt has more than 32 tokens");
  const testing::Result proc =
      run_command({"generate", save, "--tokenizer", kTokenizer, "--prompt-file", "/proc/self/comm",
                   "--max-new-tokens", "2", "--json"});
  ASSERT_EQ(proc.status, 0) << proc.err;
  EXPECT_FALSE(json_lines(proc.out)[0]["prompt_ids"].empty());
  expect_bad_input({"generate", save, "--tokenizer", kTokenizer, "--prompt", "ab\xff"},
                   "--prompt: the text to encode is not UTF-8");
  expect_bad_input({"generate", save, "--tokenizer", kTokenizer, "--prompt-file",
                    write("bad_prompt.txt", "ab\xff")},
                   "--prompt-file '");
  expect_bad_input({"generate", save, "--tokenizer", kTokenizer, "--prompt", "hi", "--backend", ""},
                   "--backend: '' is not a backend");
}

}  // namespace
}  // namespace shardwise::cli

// `shardwise train --data` as a user points it at prepared data: a text file and a token file
// holding the same ids train to the same losses, a validation file of its own replaces the
// held-out tenth, and bad data is named.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_command.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using testing::json_lines;
using testing::run_command;
using testing::source_path;

std::string write(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Each byte of `text` as a little-endian id of `width` bytes: nanoGPT's train.bin layout.
std::string as_ids(const std::string& text, int width) {
  std::string out;
  for (const char c : text) {
    out.push_back(c);
    out.append(static_cast<std::size_t>(width - 1), '\0');
  }
  return out;
}

std::string some_text() {
  std::string text;
  for (int i = 0; text.size() < 20000; ++i) {
    text += "entry " + std::to_string(i * 7919 % 4093) + " of the log, ";
    if (i % 5 == 4) text += "\n";
  }
  return text;
}

std::vector<double> values(const std::vector<nlohmann::json>& lines, const char* key) {
  std::vector<double> out;
  for (const auto& line : lines) {
    if (line.contains(key)) out.push_back(line[key].get<double>());
  }
  return out;
}

std::vector<nlohmann::json> train(std::vector<std::string> data_args) {
  std::vector<std::string> args{"train",
                                "--model",
                                source_path("examples/models/gpt_micro.json"),
                                "--steps",
                                "4",
                                "--batch",
                                "4",
                                "--eval-every",
                                "2",
                                "--json"};
  args.insert(args.end(), data_args.begin(), data_args.end());
  const testing::Result r = run_command(args);
  EXPECT_EQ(r.status, 0) << r.err;
  return json_lines(r.out);
}

TEST(TrainData, TextAndTokenFilesOfTheSameIdsTrainAlike) {
  const std::string text = some_text();
  const auto from_text = train({"--data", write("corpus.txt", text)});
  ASSERT_EQ(values(from_text, "loss").size(), 4U);
  ASSERT_EQ(values(from_text, "val_loss").size(), 2U);
  for (const auto& [format, width] : {std::pair{"tokens-u16", 2}, std::pair{"tokens-u32", 4}}) {
    const auto from_ids =
        train({"--data", write(std::string("corpus.") + format, as_ids(text, width)),
               "--data-format", format});
    EXPECT_EQ(values(from_ids, "loss"), values(from_text, "loss")) << format;
    EXPECT_EQ(values(from_ids, "val_loss"), values(from_text, "val_loss")) << format;
  }
  // The built-in corpus trains differently: the file was read.
  EXPECT_NE(values(train({}), "loss"), values(from_text, "loss"));
}

TEST(TrainData, AValidationFileReplacesTheHeldOutTenth) {
  const std::string text = some_text();
  const std::size_t train_end = text.size() - text.size() / 10;
  const auto whole = train({"--data", write("whole.txt", text)});
  const auto split =
      train({"--data", write("train.bin", as_ids(text.substr(0, train_end), 2)), "--val-data",
             write("val.bin", as_ids(text.substr(train_end), 2)), "--data-format", "tokens-u16"});
  EXPECT_EQ(values(split, "loss"), values(whole, "loss"));
  EXPECT_EQ(values(split, "val_loss"), values(whole, "val_loss"));
  // Another validation file: the same training losses, other validation losses.
  const auto other =
      train({"--data", write("train2.bin", as_ids(text.substr(0, train_end), 2)), "--val-data",
             write("val2.bin", as_ids(text.substr(0, 4000), 2)), "--data-format", "tokens-u16"});
  EXPECT_EQ(values(other, "loss"), values(whole, "loss"));
  EXPECT_NE(values(other, "val_loss"), values(whole, "val_loss"));
}

TEST(TrainData, BadDataIsNamed) {
  const std::string micro = source_path("examples/models/gpt_micro.json");
  expect_bad_input({"train", "--data-format", "tokens-u16"},
                   "--data-format describes --data, which is not given");
  expect_bad_input({"train", "--val-data", micro},
                   "--val-data describes --data, which is not given");
  expect_bad_input({"train", "--data", micro, "--data-format", "u16"},
                   "--data-format is 'u16'; expected text, tokens-u16, tokens-u32 or jsonl");
  const std::string ids = write("bad_ids.u16", as_ids(some_text(), 2));
  std::string with_bad = as_ids(std::string(17, 'a'), 2);
  with_bad[2 * 9] = 0x2c;  // id 300 at token 9
  with_bad[2 * 9 + 1] = 0x01;
  const std::string bad = write("one_bad_id.u16", with_bad);
  // Found before any rank starts, every id read once: the user's input (status 2), named by its
  // position, on one rank as on two.
  const testing::Result found = run_command(
      {"train", "--model", micro, "--data", bad, "--val-data", ids, "--data-format", "tokens-u16"});
  EXPECT_EQ(found.status, 2);
  EXPECT_EQ(found.err, "shardwise train: --data '" + bad +
                           "': token 9 (byte 18) is the id 300, outside the model's vocabulary "
                           "0..255\n");
  const testing::Result on_rank =
      run_command({"train", "--model", micro, "--data", bad, "--val-data", ids, "--data-format",
                   "tokens-u16", "--mesh", "data=2"});
  EXPECT_EQ(on_rank.status, 2);
  EXPECT_EQ(on_rank.err, found.err);
  expect_bad_input(
      {"train", "--model", micro, "--data", write("empty.bin", ""), "--data-format", "tokens-u32"},
      "empty.bin' has 0 tokens; sequences of 16 tokens need at least 170");
  expect_bad_input(
      {"train", "--model", micro, "--data", write("odd.bin", "abc"), "--data-format", "tokens-u16"},
      "odd.bin' has 3 bytes, not a whole number of 2-byte token ids (tokens-u16)");
  expect_bad_input({"train", "--model", micro, "--data", ids, "--val-data", "/dev/null",
                    "--data-format", "tokens-u16"},
                   "--val-data '/dev/null' is not a regular file");
}

// --log-dir: metrics.jsonl holds the losses the run printed (as TensorBoard's 32-bit floats),
// config.json the run's settings, and a folder holding a run is refused before anything runs.
TEST(TrainLogs, TheLogsHoldWhatTheRunPrinted) {
  const std::string folder = ::testing::TempDir() + "train_logs";
  std::filesystem::remove_all(folder);
  const auto printed = train({"--mesh", "fsdp=2", "--zero", "3", "--log-dir", folder});
  std::ifstream metrics(folder + "/metrics.jsonl");
  std::vector<nlohmann::json> logged;
  for (std::string line; std::getline(metrics, line);)
    logged.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(logged.size(), 4U);
  const std::vector<double> losses = values(printed, "loss");
  const std::vector<double> val_losses = values(printed, "val_loss");
  for (std::size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(logged[s]["step"], s + 1);
    EXPECT_EQ(static_cast<float>(logged[s]["train/loss"].get<double>()),
              static_cast<float>(losses[s]));
    EXPECT_EQ(logged[s].contains("val/loss"), s % 2 == 1);
    EXPECT_GT(logged[s]["memory/rank_1/held_bytes"].get<double>(), 0);
    EXPECT_GT(logged[s]["train/grad_norm"].get<double>(), 0);
  }
  EXPECT_EQ(static_cast<float>(logged[3]["val/loss"].get<double>()),
            static_cast<float>(val_losses[1]));
  const auto config = nlohmann::json::parse(std::ifstream(folder + "/config.json"));
  EXPECT_EQ(config["settings"]["zero"], 3);
  EXPECT_EQ(config["settings"]["learning_rate"], 1e-3);
  EXPECT_EQ(config["mesh"]["text"], "Mesh('fsdp': 2)");
  EXPECT_EQ(config["data"]["train"]["path"], "built-in");
  EXPECT_FALSE(config["placements"]["parameters"].empty());
  EXPECT_TRUE(config["pipeline"].is_null());
  std::size_t event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      ++event_files;
      EXPECT_GT(entry.file_size(), 4 * 100U);
    }
  }
  EXPECT_EQ(event_files, 1U);
  expect_bad_input({"train", "--steps", "1", "--log-dir", folder},
                   "--log-dir '" + folder + "' already holds a run's logs");
  expect_bad_input({"train", "--steps", "1", "--log-dir", "/dev/null"},
                   "--log-dir '/dev/null' is not a folder");
}

}  // namespace
}  // namespace shardwise::cli

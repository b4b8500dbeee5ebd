// `shardwise train --data` as a user points it at prepared data: a text file and a token file
// holding the same ids train to the same losses, a validation file of its own replaces the
// held-out tenth, and bad data is named.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
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

// --config replays the run a log folder's config.json describes: the same losses and the same
// config.json, on a pipelined mesh with data files, an interleaved schedule, full recomputation
// and settings no flag names (the optimizer's); flags given beside it win and say so, and a
// setting of the file the flags refuse is named as the file's.
TEST(TrainLogs, AConfigJsonReplaysItsRun) {
  const std::string root = ::testing::TempDir() + "train_replay/";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const std::string text = root + "text.txt";
  std::ofstream(text) << std::string(4000, 'a') + "The quick brown fox jumps over the lazy dog. ";
  const std::vector<std::string> first{"train",
                                       "--model",
                                       source_path("examples/models/qwen3_micro.json"),
                                       "--mesh",
                                       "data=2,pipeline=2",
                                       "--steps",
                                       "4",
                                       "--batch",
                                       "8",
                                       "--seq",
                                       "12",
                                       "--lr",
                                       "2e-3",
                                       "--warmup",
                                       "1",
                                       "--seed",
                                       "9",
                                       "--data",
                                       text,
                                       "--schedule",
                                       "interleaved",
                                       "--microbatches",
                                       "2",
                                       "--recompute",
                                       "full",
                                       "--eval-every",
                                       "2",
                                       "--json",
                                       "--log-dir",
                                       root + "a"};
  const testing::Result a = run_command(first);
  ASSERT_EQ(a.status, 0) << a.err;
  const testing::Result b =
      run_command({"train", "--config", root + "a/config.json", "--json", "--log-dir", root + "b"});
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(values(json_lines(a.out), "loss"), values(json_lines(b.out), "loss"));
  EXPECT_EQ(values(json_lines(a.out), "val_loss"), values(json_lines(b.out), "val_loss"));
  const auto config_a = nlohmann::json::parse(std::ifstream(root + "a/config.json"));
  const auto config_b = nlohmann::json::parse(std::ifstream(root + "b/config.json"));
  EXPECT_EQ(config_a, config_b);
  EXPECT_EQ(config_b["pipeline"]["schedule"], "interleaved");
  // A flag beside the file wins, with a note; the rest is the file's.
  std::ostringstream notes;
  std::streambuf* const stderr_buffer = std::cerr.rdbuf(notes.rdbuf());  // the notes' stream
  const testing::Result c = run_command(
      {"train", "--config", root + "a/config.json", "--steps", "6", "--batch", "16", "--json"});
  std::cerr.rdbuf(stderr_buffer);
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_THAT(notes.str(), ::testing::HasSubstr("--batch 16 replaces batch 8 of --config '" + root +
                                                "a/config.json'"));
  EXPECT_EQ(json_lines(c.out).size(), 6U + 1U);  // the steps and the summary
  // The optimizer's settings no flag names come back too: a file that changes them changes the
  // run.
  auto edited = config_a;
  edited["settings"]["weight_decay"] = 0.5;
  std::ofstream(root + "edited.json") << edited.dump();
  const testing::Result d = run_command({"train", "--config", root + "edited.json", "--json"});
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(values(json_lines(a.out), "loss")[0], values(json_lines(d.out), "loss")[0]);
  EXPECT_NE(values(json_lines(a.out), "loss")[3], values(json_lines(d.out), "loss")[3]);
  expect_bad_input({"train", "--config", root + "a/config.json", "--steps", "1"},
                   "--eval-every is 2; expected 0 to 1 (--eval-every as --config '" + root +
                       "a/config.json' gives it; give --eval-every to replace it)");
  // The file's pipeline settings are given settings: without a pipeline axis they are refused
  // as the same flags would be, never dropped.
  const testing::Result flags_only = run_command(
      {"train", "--mesh", "data=4", "--schedule", "interleaved", "--steps", "1", "--json"});
  const testing::Result replayed =
      run_command({"train", "--config", root + "a/config.json", "--mesh", "data=4", "--steps", "1",
                   "--eval-every", "0", "--json"});
  EXPECT_EQ(flags_only.status, 2);
  EXPECT_EQ(replayed.status, 2);
  EXPECT_THAT(replayed.err, ::testing::HasSubstr("schedule the pipeline axis; --mesh "
                                                 "Mesh('data': 4) has none"));
  expect_bad_input({"train", "--config", root + "text.txt"}, "--config '" + root + "text.txt'");
  std::ofstream(root + "bad.json") << R"({"model": {"given": 5}, "settings": {}})";
  expect_bad_input({"train", "--config", root + "bad.json"}, "\"model.given\" is 5; expected text");
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

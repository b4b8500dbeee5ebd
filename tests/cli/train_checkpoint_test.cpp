// `shardwise train --save/--resume` as a user runs it: a run stopped and resumed on the same
// layout gives the same losses, bit for bit, as one never stopped, for every ZeRO stage, HSDP,
// tensor and pipeline parallelism; a checkpoint saved on one layout continues on another
// within the trainer's tolerance; --keep, --save-async; and what cannot load is named.
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_command.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using testing::json_lines;
using testing::run_command;
using testing::source_path;

std::string fresh_folder(const std::string& name) {
  const std::string path = ::testing::TempDir() + "train_checkpoint_" + name;
  std::filesystem::remove_all(path);
  return path;
}

std::vector<std::string> train_args(const std::string& layout, std::vector<std::string> more,
                                    const std::string& steps = "6",
                                    const std::string& model = "gpt_micro.json") {
  std::vector<std::string> args{"train",   "--model", source_path("examples/models/" + model),
                                "--steps", steps,     "--batch",
                                "8",       "--json"};
  std::istringstream words(layout);
  for (std::string word; words >> word;) args.push_back(word);
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Each step's loss, by step.
std::map<std::int64_t, double> losses(const std::vector<std::string>& args) {
  const auto result = run_command(args);
  EXPECT_EQ(result.status, 0) << result.err;
  std::map<std::int64_t, double> out;
  for (const nlohmann::json& line : json_lines(result.out)) {
    if (line.contains("step")) out[line["step"].get<std::int64_t>()] = line["loss"].get<double>();
  }
  return out;
}

// Every array of a checkpoint, whole, by name.
std::map<std::string, std::vector<std::byte>> all_arrays(const std::string& folder) {
  const ckpt::CheckpointReader reader(folder);
  std::map<std::string, std::vector<std::byte>> arrays;
  for (const ckpt::ArrayRecord& array : reader.index().arrays) {
    std::vector<std::byte>& bytes = arrays[array.name];
    bytes.resize(static_cast<std::size_t>(num_elements(array.shape)) * size_in_bytes(array.dtype));
    ShardIndex box;
    for (const std::int64_t size : array.shape) box.push_back({0, size});
    const ckpt::BlockToLoad target{array.name, array.shape, array.dtype, box, bytes};
    (void)reader.read({&target, 1});
  }
  return arrays;
}

const std::vector<std::string> kLayouts{
    "",
    "--mesh data=2",
    "--mesh fsdp=2 --zero 1",
    "--mesh fsdp=2 --zero 2",
    "--mesh fsdp=2 --zero 3",
    "--mesh data=2,fsdp=2 --zero 3",  // HSDP
    "--mesh fsdp=2,model=2 --zero 2",
    "--mesh pipeline=2,fsdp=2 --zero 1",
};

TEST(TrainCheckpoint, ResumingOnTheSameLayoutIsBitIdentical) {
  for (const std::string& layout : kLayouts) {
    const std::map<std::int64_t, double> whole = losses(train_args(layout, {}));
    const std::string folder = fresh_folder("same");
    (void)losses(train_args(layout, {"--save", folder, "--save-every", "3"}));
    ASSERT_TRUE(std::filesystem::exists(folder + "/step-00000003/index.json")) << layout;
    std::filesystem::remove_all(folder + "/step-00000006");
    const std::map<std::int64_t, double> resumed = losses(train_args(layout, {"--resume", folder}));
    ASSERT_EQ(resumed.size(), 3U) << layout;
    for (const auto& [step, loss] : resumed) {
      EXPECT_EQ(loss, whole.at(step)) << layout << " step " << step;
    }
  }
}

TEST(TrainCheckpoint, ACheckpointContinuesOnAnotherLayout) {
  const std::string saved_on = "--mesh data=2,fsdp=2 --zero 3";
  const std::map<std::int64_t, double> whole = losses(train_args(saved_on, {}));
  const std::string folder = fresh_folder("other");
  (void)losses(train_args(saved_on, {"--save", folder, "--save-every", "3"}));
  std::filesystem::remove_all(folder + "/step-00000006");
  for (const std::string& layout :
       {std::string(), std::string("--mesh fsdp=4 --zero 1"), std::string("--mesh data=4"),
        std::string("--mesh model=2,pipeline=2"), std::string("--mesh data=2,model=2 --zero 3")}) {
    const std::map<std::int64_t, double> resumed =
        losses(train_args(layout, {"--resume", folder + "/step-00000003"}));
    ASSERT_EQ(resumed.size(), 3U) << layout;
    for (const auto& [step, loss] : resumed) {
      EXPECT_NEAR(loss, whole.at(step), 1e-4) << layout << " step " << step;
    }
  }
}

// The Llama's checkpoints: bit for bit on the layout that saved them (its key/value heads
// replicated over model=4, each rank holding one head, and a pipelined ZeRO-3 mesh), within
// 1e-4 on three others (one of them replicating the heads under ZeRO-2).
TEST(TrainCheckpoint, ALlamaResumesOnItsLayoutAndOnOthers) {
  const std::string model = "llama_micro.json";
  for (const std::string& saved_on :
       {std::string("--mesh model=4"), std::string("--mesh fsdp=2,pipeline=2 --zero 3")}) {
    const std::map<std::int64_t, double> whole = losses(train_args(saved_on, {}, "6", model));
    const std::string folder = fresh_folder("llama");
    (void)losses(train_args(saved_on, {"--save", folder, "--save-every", "3"}, "6", model));
    std::filesystem::remove_all(folder + "/step-00000006");
    const std::map<std::int64_t, double> same =
        losses(train_args(saved_on, {"--resume", folder}, "6", model));
    ASSERT_EQ(same.size(), 3U) << saved_on;
    for (const auto& [step, loss] : same) {
      EXPECT_EQ(loss, whole.at(step)) << saved_on << " step " << step;
    }
    for (const std::string& layout :
         {std::string("--mesh data=2,model=2 --zero 1"), std::string("--mesh pipeline=2"),
          std::string("--mesh fsdp=2,model=4 --zero 2")}) {
      const std::map<std::int64_t, double> resumed =
          losses(train_args(layout, {"--resume", folder + "/step-00000003"}, "6", model));
      ASSERT_EQ(resumed.size(), 3U) << saved_on << " to " << layout;
      for (const auto& [step, loss] : resumed) {
        EXPECT_NEAR(loss, whole.at(step), 1e-4) << saved_on << " to " << layout << " " << step;
      }
    }
  }
}

TEST(TrainCheckpoint, KeepLeavesTheNewestAndAsyncSavesTheSameState) {
  const std::string sync = fresh_folder("sync");
  const std::string async = fresh_folder("async");
  (void)losses(
      train_args("--mesh fsdp=2 --zero 3", {"--save", sync, "--save-every", "1", "--keep", "2"}));
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(sync)) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"step-00000005", "step-00000006"}));
  const auto result = run_command(
      train_args("--mesh fsdp=2 --zero 3", {"--save", async, "--save-every", "2", "--save-async"}));
  ASSERT_EQ(result.status, 0) << result.err;
  for (const char* step : {"step-00000002", "step-00000004", "step-00000006"}) {
    ASSERT_TRUE(std::filesystem::exists(async + "/" + step + "/index.json")) << step;
  }
  // The background save holds what the synchronous one holds: every array (the values and
  // both AdamW moments), bit for bit.
  const auto sync_arrays = all_arrays(sync + "/step-00000006");
  const auto async_arrays = all_arrays(async + "/step-00000006");
  EXPECT_EQ(sync_arrays.size(), 3 * 28U);  // gpt_micro's 28 parameters, three arrays each
  EXPECT_TRUE(sync_arrays == async_arrays);
}

TEST(TrainCheckpoint, WhatCannotLoadIsNamed) {
  const std::string folder = fresh_folder("bad");
  expect_bad_input(train_args("", {"--save-every", "2"}), "--save-every needs --save PATH");
  expect_bad_input(train_args("", {"--save", folder, "--save-every", "7"}),
                   "--save-every is 7; expected 0 (the last step only) to --steps 6");
  expect_bad_input(train_args("", {"--save", "/dev/zero"}),
                   "--save '/dev/zero' is not a folder this run can write");
  expect_bad_input(train_args("", {"--save", "/dev/zero/below"}),
                   "--save '/dev/zero/below' is not a folder this run can write");
  // Input refused after --save was checked leaves no folder behind: the first save makes it.
  expect_bad_input(train_args("", {"--save", folder + "_never", "--recompute", "bogus"}),
                   "--recompute is 'bogus'; expected none, selective or full");
  EXPECT_FALSE(std::filesystem::exists(folder + "_never"));
  expect_bad_input(train_args("", {"--resume", folder + "/nothing"}),
                   "is not a checkpoint or a folder of them");
  (void)losses(train_args("", {"--save", folder}));
  expect_bad_input({"train", "--model", "tiny", "--steps", "2", "--resume", folder},
                   "holds a GPT of n_layer 2, n_head 2, n_embd 32");
  // Another seed continues, with a note that the run is not the saved one's.
  std::vector<std::string> reseeded = train_args("", {"--resume", folder, "--seed", "7"}, "8");
  reseeded.erase(std::find(reseeded.begin(), reseeded.end(), "--json"));
  const auto note = run_command(reseeded);
  EXPECT_EQ(note.status, 0) << note.err;
  EXPECT_THAT(note.out, ::testing::HasSubstr("note: --seed 1337 when saved, 7 now"));
  // An array taken out of the index is named.
  const std::string index_path = folder + "/step-00000006/index.json";
  std::ifstream in(index_path);
  nlohmann::json index = nlohmann::json::parse(in);
  in.close();
  index["arrays"].erase("optimizer/exp_avg/transformer.wpe.weight");
  std::ofstream(index_path) << index.dump();
  expect_bad_input(train_args("", {"--resume", folder}),
                   "lacks 1 arrays the model needs: 'optimizer/exp_avg/transformer.wpe.weight'");
  // An empty folder holds no checkpoint.
  std::filesystem::create_directories(folder + "_empty");
  expect_bad_input(train_args("", {"--resume", folder + "_empty"}), "holds no whole checkpoint");
}

TEST(TrainCheckpoint, AFullDiskLeavesTheEarlierCheckpoint) {
  const std::string folder = fresh_folder("full");
  (void)losses(train_args("--mesh fsdp=2 --zero 1", {"--save", folder}, "3"));
  // Files may grow to 64 KiB: every rank's shard file is larger.
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit before{};
  getrlimit(RLIMIT_FSIZE, &before);
  rlimit small = before;
  small.rlim_cur = 64 * 1024;
  setrlimit(RLIMIT_FSIZE, &small);
  const auto result =
      run_command(train_args("--mesh fsdp=2 --zero 1", {"--save", folder, "--resume", folder}));
  setrlimit(RLIMIT_FSIZE, &before);
  EXPECT_EQ(result.status, 2);
  EXPECT_THAT(result.err, ::testing::HasSubstr("step-00000006' not saved: rank 0: cannot write"));
  EXPECT_THAT(result.err, ::testing::HasSubstr("File too large"));
  EXPECT_FALSE(std::filesystem::exists(folder + "/step-00000006"));
  // Nothing but the earlier checkpoint: no temporary folder, no lock.
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"step-00000003"}) << result.err;
  const auto verify = run_command({"ckpt", "inspect", "--verify", folder});
  EXPECT_EQ(verify.status, 0) << verify.err;
  EXPECT_THAT(verify.out, ::testing::HasSubstr("step 3"));
  EXPECT_THAT(verify.out, ::testing::HasSubstr("every checksum matches"));
}

}  // namespace
}  // namespace shardwise::cli

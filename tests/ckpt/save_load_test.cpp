// Saving from every rank and loading into another layout, through the ckpt layer alone: values
// survive any change of blocks, a reader reads only the chunks its blocks touch, and what goes
// wrong on one rank (a disagreement, a failed write, a damaged byte) fails every rank alike and
// leaves the earlier checkpoint whole.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_folders.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/ckpt/checkpoint_save.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise::ckpt {
namespace {

using ::testing::HasSubstr;

std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

// Element (i, j) of the test array: its global index, so any block says where it came from.
float value_at(std::int64_t i, std::int64_t j, std::int64_t cols) {
  return static_cast<float>(i * cols + j) + 0.25F;
}

// Rank r's block of a rows x cols array split into `row_parts` x `col_parts` (rank order
// row-major), filled with value_at.
struct Block {
  ShardIndex box;
  std::vector<float> values;
};
Block block_of(int rank, std::int64_t rows, std::int64_t cols, int row_parts, int col_parts) {
  const int r = rank / col_parts;
  const int c = rank % col_parts;
  Block block;
  block.box = {{rows * r / row_parts, rows * (r + 1) / row_parts},
               {cols * c / col_parts, cols * (c + 1) / col_parts}};
  for (std::int64_t i = block.box[0].start; i < block.box[0].stop; ++i) {
    for (std::int64_t j = block.box[1].start; j < block.box[1].stop; ++j) {
      block.values.push_back(value_at(i, j, cols));
    }
  }
  return block;
}

// Saves a 37 x 23 array split rows x cols over rows x cols ranks, plus a small array every rank
// holds whole (written once).
// The run the tests' saves belong to (a save replaces a checkpoint of its own run only).
const std::string kRun = "0123456789abcdef0123456789abcdef";

SaveOptions of_the_run() {
  SaveOptions options;
  options.run_id = kRun;
  return options;
}

void save_grid(const std::filesystem::path& folder, int row_parts, int col_parts,
               std::uint64_t chunk_bytes = 1 << 20, const std::string& run_id = kRun) {
  run_local(row_parts * col_parts, [&](Communicator& comm) {
    Block block = block_of(comm.rank(), 37, 23, row_parts, col_parts);
    std::vector<float> bias(5, 1.5F);
    const std::vector<BlockToSave> blocks{
        {"w", {37, 23}, DType::kF32, "grid", block.box, std::as_bytes(std::span(block.values))},
        {"b", {5}, DType::kF32, "replicated", {{0, 5}}, std::as_bytes(std::span(bias))}};
    SaveOptions options;
    options.chunk_bytes = chunk_bytes;
    options.run_id = run_id;
    save_checkpoint(comm, folder, blocks, R"({"step": 7})", options);
  });
}

TEST(CheckpointSaveLoad, ValuesSurviveAnyChangeOfBlocks) {
  const auto root = fresh_folder("grid");
  save_grid(root / "a", 2, 3);
  const CheckpointReader reader(root / "a");
  EXPECT_EQ(reader.index().find("b")->shards.size(), 1U) << "a replicated block is written once";
  EXPECT_EQ(reader.index().find("w")->shards.size(), 6U);
  EXPECT_EQ(reader.index().metadata_json, R"({"step":7})");
  EXPECT_EQ(reader.verify(), reader.index().total_bytes());
  // Loaded as 3 x 1, 1 x 4 and whole: every element where it belongs.
  for (const auto& [rows, cols] : {std::pair{3, 1}, std::pair{1, 4}, std::pair{1, 1}}) {
    run_local(rows * cols, [&](Communicator& comm) {
      const Block expected = block_of(comm.rank(), 37, 23, rows, cols);
      std::vector<float> got(expected.values.size(), -1.0F);
      std::vector<float> bias(5, 0.0F);
      const std::vector<BlockToLoad> targets{
          {"w", {37, 23}, DType::kF32, expected.box, std::as_writable_bytes(std::span(got))},
          {"b", {5}, DType::kF32, {{0, 5}}, std::as_writable_bytes(std::span(bias))}};
      load_checkpoint(comm, CheckpointReader(root / "a"), targets);
      EXPECT_EQ(got, expected.values) << rows << " x " << cols << " rank " << comm.rank();
      EXPECT_EQ(bias, std::vector<float>(5, 1.5F));
    });
  }
}

TEST(CheckpointSaveLoad, AReaderReadsOnlyTheChunksItsBlockTouches) {
  const auto root = fresh_folder("chunks");
  save_grid(root / "a", 1, 1, 64);  // one shard of 37 x 23 floats in 64-byte chunks
  const CheckpointReader reader(root / "a");
  // Rows 10 to 12: 3 x 23 x 4 = 276 bytes, inside 6 chunks of 64.
  std::vector<float> got(3 * 23);
  const BlockToLoad target{
      "w", {37, 23}, DType::kF32, {{10, 13}, {0, 23}}, std::as_writable_bytes(std::span(got))};
  const ReadStats stats = reader.read({&target, 1});
  EXPECT_EQ(stats.bytes_needed, 276U);
  EXPECT_LE(stats.bytes_read, 6U * 64U);
  EXPECT_EQ(got[0], value_at(10, 0, 23));
  EXPECT_EQ(got.back(), value_at(12, 22, 23));
}

TEST(CheckpointSaveLoad, AFlippedBitIsFoundByItsChecksum) {
  const auto root = fresh_folder("flip");
  save_grid(root / "a", 1, 2, 128);
  const std::filesystem::path file = root / "a" / "rank-00001.safetensors";
  const auto size = std::filesystem::file_size(file);
  {
    std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekg(static_cast<std::streamoff>(size - 100));
    char byte = 0;
    stream.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    stream.seekp(static_cast<std::streamoff>(size - 100));
    stream.write(&byte, 1);
  }
  const CheckpointReader reader(root / "a");
  try {
    (void)reader.verify();
    FAIL() << "a flipped bit went unnoticed";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("checksum mismatch"));
    EXPECT_THAT(e.what(), HasSubstr("rank-00001.safetensors"));
  }
  // Every loading rank fails alike, though only the one reading that chunk finds it.
  std::mutex mutex;
  std::vector<std::string> errors;
  run_local(2, [&](Communicator& comm) {
    const Block expected = block_of(comm.rank(), 37, 23, 1, 2);
    std::vector<float> got(expected.values.size());
    const BlockToLoad target{
        "w", {37, 23}, DType::kF32, expected.box, std::as_writable_bytes(std::span(got))};
    try {
      load_checkpoint(comm, reader, {&target, 1});
    } catch (const CheckpointError& e) {
      const std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0], errors[1]);
  EXPECT_THAT(errors[0], HasSubstr("rank 1: checksum mismatch"));
}

TEST(CheckpointSaveLoad, ATruncatedFileIsNamed) {
  const auto root = fresh_folder("truncated");
  save_grid(root / "a", 1, 2);
  const std::filesystem::path file = root / "a" / "rank-00000.safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 8);
  const CheckpointReader reader(root / "a");
  EXPECT_THROW(
      {
        try {
          (void)reader.verify();
        } catch (const CheckpointError& e) {
          EXPECT_THAT(e.what(), HasSubstr("a truncated file?"));
          throw;
        }
      },
      CheckpointError);
}

TEST(CheckpointSaveLoad, RanksThatDisagreeOnAnArrayFailAlike) {
  const auto root = fresh_folder("disagree");
  std::mutex mutex;
  std::vector<std::string> errors;
  run_local(3, [&](Communicator& comm) {
    std::vector<float> values(4, 1.0F);
    // Rank 2 thinks the array is 8 long.
    const Shape shape = comm.rank() == 2 ? Shape{8} : Shape{4};
    const BlockToSave block{"x", shape,    DType::kF32,
                            "",  {{0, 4}}, std::as_bytes(std::span(values))};
    try {
      save_checkpoint(comm, root / "a", {&block, 1}, "{}");
    } catch (const CheckpointError& e) {
      const std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 3U);
  EXPECT_EQ(errors[0], errors[2]);
  EXPECT_THAT(errors[0], HasSubstr("rank 2 has array 'x' as (8,)"));
  EXPECT_FALSE(std::filesystem::exists(root / "a"));
}

TEST(CheckpointSaveLoad, BlocksThatDoNotTileTheArrayAreRefused) {
  const auto root = fresh_folder("tile");
  std::mutex mutex;
  std::vector<std::string> errors;
  run_local(2, [&](Communicator& comm) {
    std::vector<float> values(6, 1.0F);
    // Rows 0-5 and 4-9 of a 10-row array: they overlap.
    const ShardIndex box = comm.rank() == 0 ? ShardIndex{{0, 6}} : ShardIndex{{4, 10}};
    const BlockToSave block{"x", {10}, DType::kF32, "", box, std::as_bytes(std::span(values))};
    try {
      save_checkpoint(comm, root / "a", {&block, 1}, "{}");
    } catch (const CheckpointError& e) {
      const std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_THAT(errors[0], HasSubstr("do not split 0:10 into consecutive parts"));
}

TEST(CheckpointSaveLoad, AWriteThatFailsOnOneRankLeavesTheEarlierCheckpoint) {
  const auto root = fresh_folder("failed");
  save_grid(root / "a", 1, 2);
  const auto before = std::filesystem::file_size(root / "a" / kIndexFileName);
  std::mutex mutex;
  std::vector<std::string> errors;
  run_local(2, [&](Communicator& comm) {
    Block block = block_of(comm.rank(), 37, 23, 1, 2);
    const BlockToSave saved{"w",    {37, 23},  DType::kF32,
                            "grid", block.box, std::as_bytes(std::span(block.values))};
    CheckpointSave save(comm, root / "a", {&saved, 1}, "{}", of_the_run());
    // Rank 1 hands write() too few bytes: its write fails, and so does every rank's commit.
    std::span<const std::byte> bytes = saved.bytes;
    if (comm.rank() == 1) bytes = bytes.first(8);
    save.write({&bytes, 1});
    try {
      save.commit();
    } catch (const CheckpointError& e) {
      const std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0], errors[1]);
  EXPECT_THAT(errors[0], HasSubstr("not saved: rank 1:"));
  EXPECT_EQ(std::filesystem::file_size(root / "a" / kIndexFileName), before);
  EXPECT_FALSE(std::filesystem::exists(save_work_folder(root / "a", kRun, "partial")));
  EXPECT_EQ(CheckpointReader(root / "a").verify(),
            CheckpointReader(root / "a").index().total_bytes());
}

// A peer that fails outside the save (its step threw) aborts the run while rank 0 may still be
// in the save's last collective or before it: whichever, rank 0 leaves no temporary folder. A
// save abandoned before commit (the destructor) leaves none either.
TEST(CheckpointSaveLoad, APeerThatFailsMidSaveLeavesNoTemporaryFolder) {
  const auto root = fresh_folder("peer_failed");
  save_grid(root / "a", 1, 2);
  for (const bool rank0_commits : {true, false}) {
    EXPECT_THROW(
        run_local(
            2,
            [&](Communicator& comm) {
              Block block = block_of(comm.rank(), 37, 23, 1, 2);
              const BlockToSave saved{"w",    {37, 23},  DType::kF32,
                                      "grid", block.box, std::as_bytes(std::span(block.values))};
              CheckpointSave save(comm, root / "a", {&saved, 1}, "{}", of_the_run());
              // Rank 0 made it and removes it, on its own thread: only it
              // can look before the removal.
              if (comm.rank() == 0) {
                EXPECT_TRUE(std::filesystem::exists(save_work_folder(root / "a", kRun, "partial")));
              }
              // Where rank 0 does not wait in commit, rank 1 fails before it
              // writes: a file it made while rank 0 removed the folder would
              // keep the folder (removed by the next save, not tested here).
              const bool fails_early = comm.rank() == 1 && !rank0_commits;
              if (fails_early) throw std::runtime_error("the step failed");
              std::span<const std::byte> bytes = saved.bytes;
              save.write({&bytes, 1});
              if (comm.rank() == 1) throw std::runtime_error("the step failed");
              if (rank0_commits) (void)save.commit();
            }),
        CommError)
        << rank0_commits;
    EXPECT_FALSE(std::filesystem::exists(save_work_folder(root / "a", kRun, "partial")))
        << rank0_commits;
    EXPECT_EQ(CheckpointReader(root / "a").verify(),
              CheckpointReader(root / "a").index().total_bytes());
  }
}

TEST(CheckpointSaveLoad, AnInterruptedSaveIsNotACheckpoint) {
  const auto root = fresh_folder("interrupted");
  save_grid(root / "step-00000001", 1, 1);
  // A save that died before its index: the folder a crash leaves.
  std::filesystem::create_directories(root / ".step-00000002.partial");
  std::ofstream(root / ".step-00000002.partial" / "rank-00000.safetensors") << "half";
  std::filesystem::create_directories(root / "step-00000003");  // no index
  EXPECT_EQ(resolve_checkpoint(root), root / "step-00000001");
  EXPECT_THROW((void)CheckpointReader(root / "step-00000003"), CheckpointError);
  ASSERT_EQ(list_checkpoints(root).size(), 1U);
}

TEST(CheckpointSaveLoad, MissingAndExtraArraysAreNamed) {
  const auto root = fresh_folder("names");
  save_grid(root / "a", 1, 1);
  const CheckpointReader reader(root / "a");
  try {
    require_arrays(reader.index(), {"w", "b", "c"}, "it");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("lacks 1 arrays the model needs: 'c'"));
  }
  try {
    require_arrays(reader.index(), {"w"}, "it");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds 1 arrays the model does not have: 'b'"));
  }
  std::vector<float> got(3);
  const BlockToLoad wrong{
      "w", {37, 22}, DType::kF32, {{0, 1}, {0, 3}}, std::as_writable_bytes(std::span(got))};
  EXPECT_THROW((void)reader.read({&wrong, 1}), CheckpointError);
}

TEST(CheckpointFolders, KeepNewestRemovesTheOldestUpToTheSavedStep) {
  const auto root = fresh_folder("keep");
  for (const int step : {1, 2, 3, 10}) save_grid(root / step_folder_name(step), 1, 1);
  // Step 10 is a later step of the run: a run that has just saved step 3 keeps 2 and 3, and
  // leaves 10.
  EXPECT_THAT(keep_newest(root, 2, 3, kRun), ::testing::IsEmpty());
  std::vector<std::int64_t> left;
  for (const SavedStep& saved : list_checkpoints(root)) left.push_back(saved.step);
  EXPECT_EQ(left, (std::vector<std::int64_t>{2, 3, 10}));
  EXPECT_EQ(step_folder_name(10), "step-00000010");
  // A folder named by a step past 2^63 is not a checkpoint, and does not stop the listing.
  save_grid(root / "step-99999999999999999999", 1, 1);
  EXPECT_EQ(list_checkpoints(root).size(), 3U);
}

TEST(CheckpointSaveLoad, ASaveReplacesACheckpointAndNothingElse) {
  const auto root = fresh_folder("replace");
  save_grid(root / "a", 1, 1);
  save_grid(root / "a", 1, 2);  // the same run's: replaced, now two shards
  EXPECT_EQ(CheckpointReader(root / "a").index().find("w")->shards.size(), 2U);
  EXPECT_EQ(CheckpointReader(root / "a").index().run_id, kRun);
  EXPECT_FALSE(std::filesystem::exists(save_work_folder(root / "a", kRun, "partial")));
  // A folder of the user's is not a checkpoint: left as it is.
  std::filesystem::create_directories(root / "mine");
  std::ofstream(root / "mine" / "notes.txt") << "keep me";
  try {
    save_grid(root / "mine", 1, 1);
    FAIL() << "a save replaced a folder that was not a checkpoint";
  } catch (const std::exception& e) {  // run_local passes rank 0's error on
    EXPECT_THAT(e.what(), HasSubstr("'" + (root / "mine").string() +
                                    "' is a folder without an index.json: no checkpoint; it "
                                    "is left as it is"));
  }
  EXPECT_TRUE(std::filesystem::exists(root / "mine" / "notes.txt"));
}

}  // namespace
}  // namespace shardwise::ckpt

namespace shardwise::ckpt {
namespace {

// Replicas share the writing: 4 ranks each holding the same 8 arrays write 2 each, once.
TEST(CheckpointSaveLoad, ReplicasShareTheWriting) {
  const auto root = ::testing::TempDir() + std::string("replicas");
  std::filesystem::remove_all(root);
  run_local(4, [&](Communicator& comm) {
    std::vector<float> values(16, 2.0F);
    std::vector<BlockToSave> blocks;
    for (int a = 0; a < 8; ++a) {
      blocks.push_back({"a" + std::to_string(a),
                        {16},
                        DType::kF32,
                        "replicated",
                        {{0, 16}},
                        std::as_bytes(std::span(values))});
    }
    save_checkpoint(comm, root, blocks, "{}");
  });
  const CheckpointReader reader(root);
  std::map<std::string, int> per_file;
  for (const ArrayRecord& array : reader.index().arrays) {
    ASSERT_EQ(array.shards.size(), 1U);
    ++per_file[array.shards[0].file];
  }
  EXPECT_EQ(per_file, (std::map<std::string, int>{{"rank-00000.safetensors", 2},
                                                  {"rank-00001.safetensors", 2},
                                                  {"rank-00002.safetensors", 2},
                                                  {"rank-00003.safetensors", 2}}));
}

}  // namespace
}  // namespace shardwise::ckpt

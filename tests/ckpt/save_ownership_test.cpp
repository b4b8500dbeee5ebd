// What a save may replace or remove: only what shardwise wrote for the same run. A user's
// folder that happens to hold an index.json, another run's checkpoint, a symlink, a folder with
// a file of the user's in it all survive byte for byte; two runs saving the same step at once
// end with one whole checkpoint and one clear refusal; a second run on a locked folder is
// refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_folders.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/ckpt/checkpoint_save.hpp"
#include "shardwise/ckpt/save_folder_lock.hpp"
#include "shardwise/comm/run_local.hpp"
#include "tree_snapshot.hpp"

namespace shardwise::ckpt {
namespace {

using shardwise::testing::tree_snapshot;
using ::testing::HasSubstr;

const std::string kRun = "00000000000000000000000000000001";
const std::string kOtherRun = "00000000000000000000000000000002";

std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / ("own_" + name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

// A one-rank save of a small array at `folder` by run `run_id`; the error it gives, or "".
std::string save(const std::filesystem::path& folder, const std::string& run_id,
                 float value = 1.0F) {
  std::string error;
  run_local(1, [&](Communicator& comm) {
    std::vector<float> values(6, value);
    const BlockToSave block{"x", {6}, DType::kF32, "", {{0, 6}}, std::as_bytes(std::span(values))};
    SaveOptions options;
    options.run_id = run_id;
    try {
      save_checkpoint(comm, folder, {&block, 1}, "{}", options);
    } catch (const CheckpointError& e) {
      error = e.what();
    }
  });
  return error;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(SaveOwnership, AUsersFolderHoldingAnIndexIsNeverReplaced) {
  const auto root = fresh_folder("user");
  write_file(root / "site" / "index.json", "<html>my site</html>");
  write_file(root / "site" / "about.html", "about me");
  const auto before = tree_snapshot(root);
  EXPECT_THAT(save(root / "site", kRun),
              HasSubstr("holds an index.json that is no shardwise checkpoint's"));
  EXPECT_EQ(tree_snapshot(root), before);
}

TEST(SaveOwnership, AnotherRunsCheckpointAndOneWithAUsersFileStay) {
  const auto root = fresh_folder("other");
  ASSERT_EQ(save(root / "a", kOtherRun), "");
  ASSERT_EQ(save(root / "b", kRun), "");
  write_file(root / "b" / "notes.txt", "mine");
  const auto before = tree_snapshot(root);
  EXPECT_THAT(save(root / "a", kRun, 2.0F), HasSubstr("is another run's checkpoint (run " +
                                                      kOtherRun + "); it is left as it is"));
  EXPECT_THAT(save(root / "b", kRun, 2.0F),
              HasSubstr("holds 'notes.txt', which its index does not name"));
  EXPECT_EQ(tree_snapshot(root), before);
  // The run's own checkpoint, as it wrote it, is replaced.
  std::filesystem::remove(root / "b" / "notes.txt");
  EXPECT_EQ(save(root / "b", kRun, 3.0F), "");
  std::vector<float> got(6);
  const BlockToLoad target{"x", {6}, DType::kF32, {{0, 6}}, std::as_writable_bytes(std::span(got))};
  (void)CheckpointReader(root / "b").read({&target, 1});
  EXPECT_EQ(got, std::vector<float>(6, 3.0F));
}

TEST(SaveOwnership, NothingIsWrittenThroughASymlink) {
  const auto root = fresh_folder("symlink");
  ASSERT_EQ(save(root / "target", kRun), "");
  std::filesystem::create_directory_symlink(root / "target", root / "link");
  const auto before = tree_snapshot(root);
  EXPECT_THAT(save(root / "link", kRun, 2.0F), HasSubstr("is a symlink; it is left as it is"));
  EXPECT_EQ(tree_snapshot(root), before);
  // A data file that is a symlink (to a file outside the folder) is not read.
  write_file(root / "outside.bin", std::string(4096, 'x'));
  std::filesystem::remove(root / "target" / "rank-00000.safetensors");
  std::filesystem::create_symlink(root / "outside.bin", root / "target" / "rank-00000.safetensors");
  std::vector<float> got(6);
  const BlockToLoad target{"x", {6}, DType::kF32, {{0, 6}}, std::as_writable_bytes(std::span(got))};
  try {
    (void)CheckpointReader(root / "target").read({&target, 1});
    FAIL() << "a symlinked data file was read";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a symlink"));
  }
  // Nor is it the run's own checkpoint any more: not replaced, not removed.
  EXPECT_EQ(inspect_save_place(root / "target", kRun).occupant, SavePlace::Occupant::kOther);
  EXPECT_THAT(*remove_checkpoint(root / "target", kRun), HasSubstr("left as it is"));
  EXPECT_TRUE(std::filesystem::exists(root / "outside.bin"));
}

TEST(SaveOwnership, KeepRemovesOnlyTheRunsOwnCheckpoints) {
  const auto root = fresh_folder("keep");
  write_file(root / "step-00000001" / "index.json", "{\"mine\": true}");
  write_file(root / "step-00000001" / "data.csv", "1,2,3");
  ASSERT_EQ(save(root / "step-00000002", kOtherRun), "");
  for (const char* step : {"step-00000003", "step-00000004", "step-00000005"}) {
    ASSERT_EQ(save(root / step, kRun), "");
  }
  const auto user = tree_snapshot(root / "step-00000001");
  const auto other = tree_snapshot(root / "step-00000002");
  const std::vector<std::string> notes = keep_newest(root, 1, 5, kRun);
  EXPECT_EQ(tree_snapshot(root / "step-00000001"), user);
  EXPECT_EQ(tree_snapshot(root / "step-00000002"), other);
  std::vector<std::int64_t> left;
  for (const SavedStep& saved : list_checkpoints(root)) left.push_back(saved.step);
  EXPECT_EQ(left, (std::vector<std::int64_t>{1, 2, 5}));
  ASSERT_EQ(notes.size(), 2U);
  EXPECT_THAT(notes[0], HasSubstr("step-00000001': it holds an index.json that is no shardwise"));
  EXPECT_THAT(notes[1], HasSubstr("step-00000002': it is another run's checkpoint"));
}

TEST(SaveOwnership, LeftoversAreOnlyTheRunsOwnInterruptedSaves) {
  const auto root = fresh_folder("leftovers");
  // The user's folders, named as the saves' once were, and another run's interrupted save.
  for (const std::string& name :
       std::vector<std::string>{".step-3.partial", ".step-00000004.removing", ".step-5.old",
                                ".step-00000006." + kOtherRun + ".partial"}) {
    write_file(root / name / "rank-00000.safetensors", "the user's");
  }
  // This run's: one as a killed save leaves it, one a user put a file into.
  write_file(root / (".step-00000007." + kRun + ".partial") / "rank-00000.safetensors", "half");
  write_file(root / (".step-00000008." + kRun + ".removing") / "index.json", "{}");
  write_file(root / (".step-00000008." + kRun + ".removing") / "mine.txt", "keep");
  std::map<std::string, std::string> expected = tree_snapshot(root);
  expected.erase(".step-00000007." + kRun + ".partial");
  expected.erase(".step-00000007." + kRun + ".partial/rank-00000.safetensors");
  // The folder with the user's file in it is left whole: its index.json too.
  const std::vector<std::string> notes = remove_leftovers(root, kRun);
  EXPECT_EQ(tree_snapshot(root), expected);
  ASSERT_EQ(notes.size(), 1U);
  EXPECT_THAT(notes[0], HasSubstr("holds 'mine.txt', which no save writes; it is left as it is"));
}

// A run continued from step 2 of another (its ancestor) may remove that run's checkpoints up
// to step 2, and its leftovers; the ancestor's steps 3 and 4 are another branch and stay.
TEST(SaveOwnership, KeepFollowsTheLineNotTheBranches) {
  const auto root = fresh_folder("line");
  for (const char* step : {"step-00000001", "step-00000002", "step-00000003", "step-00000004"}) {
    ASSERT_EQ(save(root / step, kOtherRun), "");
  }
  write_file(root / (".step-00000005." + kOtherRun + ".partial") / "rank-00000.safetensors", "");
  for (const char* step : {"step-00000006", "step-00000007"})
    ASSERT_EQ(save(root / step, kRun), "");
  const std::vector<RunAncestor> line{{kOtherRun, 2}};
  EXPECT_THAT(remove_leftovers(root, kRun, line), ::testing::IsEmpty());
  const std::vector<std::string> notes = keep_newest(root, 1, 7, kRun, line);
  std::vector<std::int64_t> left;
  for (const SavedStep& saved : list_checkpoints(root)) left.push_back(saved.step);
  EXPECT_EQ(left, (std::vector<std::int64_t>{3, 4, 7}));
  ASSERT_EQ(notes.size(), 2U);
  EXPECT_THAT(notes[0], HasSubstr("step-00000003': it is another run's checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(root / (".step-00000005." + kOtherRun + ".partial")));
}

TEST(SaveOwnership, TwoRunsSavingOneStepAtOnceLeaveOneWholeCheckpoint) {
  for (int trial = 0; trial < 12; ++trial) {
    const auto root = fresh_folder("race");
    std::string errors[2];
    std::thread first([&] { errors[0] = save(root / "step-00000001", kRun, 1.0F); });
    std::thread second([&] { errors[1] = save(root / "step-00000001", kOtherRun, 2.0F); });
    first.join();
    second.join();
    // One succeeded, the other was refused, and the folder is the winner's, whole.
    ASSERT_NE(errors[0].empty(), errors[1].empty()) << errors[0] << " | " << errors[1];
    const int winner = errors[0].empty() ? 0 : 1;
    EXPECT_THAT(errors[1 - winner], HasSubstr("it is left as it is"));
    const CheckpointReader reader(root / "step-00000001");
    EXPECT_EQ(reader.index().run_id, winner == 0 ? kRun : kOtherRun);
    EXPECT_EQ(reader.verify(), reader.index().total_bytes());
    std::vector<float> got(6);
    const BlockToLoad target{
        "x", {6}, DType::kF32, {{0, 6}}, std::as_writable_bytes(std::span(got))};
    (void)reader.read({&target, 1});
    EXPECT_EQ(got, std::vector<float>(6, winner == 0 ? 1.0F : 2.0F));
    // Neither left a temporary folder.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(root)) ++entries;
    EXPECT_EQ(entries, 1U);
  }
}

TEST(SaveFolderLockTest, ASecondHolderIsRefusedAndNothingIsLeftBehind) {
  const auto root = fresh_folder("lock");
  const std::filesystem::path folder = root / "saves";
  {
    const SaveFolderLock lock(folder);
    EXPECT_TRUE(std::filesystem::exists(folder / SaveFolderLock::kFileName));
    try {
      const SaveFolderLock second(folder);
      FAIL() << "two holders";
    } catch (const CheckpointError& e) {
      EXPECT_THAT(e.what(), HasSubstr("is in use: another run is saving into it"));
    }
  }
  // The lock made the folder; empty when it let go, the folder went too.
  EXPECT_FALSE(std::filesystem::exists(folder));
  // Every folder it made goes where it stays empty, the upper ones too.
  { const SaveFolderLock lock(root / "n1" / "n2" / "n3"); }
  EXPECT_FALSE(std::filesystem::exists(root / "n1"));
  // A file of the lock's name that was there is used and kept.
  write_file(root / "kept" / SaveFolderLock::kFileName, "");
  { const SaveFolderLock lock(root / "kept"); }
  EXPECT_TRUE(std::filesystem::exists(root / "kept" / SaveFolderLock::kFileName));
  // A folder that was there stays, with what is in it; a symlink at the lock's name is refused.
  write_file(folder / "keep.txt", "x");
  write_file(root / "elsewhere.txt", "y");
  { const SaveFolderLock lock(folder); }
  EXPECT_TRUE(std::filesystem::exists(folder / "keep.txt"));
  EXPECT_FALSE(std::filesystem::exists(folder / SaveFolderLock::kFileName));
  std::filesystem::create_symlink(root / "elsewhere.txt", folder / SaveFolderLock::kFileName);
  const auto before = tree_snapshot(root);
  EXPECT_THROW({ const SaveFolderLock lock(folder); }, CheckpointError);
  EXPECT_EQ(tree_snapshot(root), before);
}

TEST(SaveOwnership, AnIndexWithoutChecksumsIsRefused) {
  const auto root = fresh_folder("nochecksum");
  ASSERT_EQ(save(root / "a", kRun), "");
  std::ifstream in(root / "a" / "index.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::size_t at = text.find("\"chunk_bytes\":1048576");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("\"chunk_bytes\":1048576").size(), "\"chunk_bytes\":0");
  const std::size_t crc = text.find("\"crc32c\":[");
  text.replace(crc, text.find(']', crc) - crc + 1, "\"crc32c\":[]");
  write_file(root / "a" / "index.json", text);
  try {
    (void)CheckpointReader(root / "a");
    FAIL() << "an index without checksums was read";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("has chunk_bytes 0 (no checksums)"));
  }
}

}  // namespace
}  // namespace shardwise::ckpt

namespace shardwise::ckpt {
namespace {

// A rank whose disk is slow keeps answering while it writes: the save waits for it past its
// timeout. A rank that stops answering (a stopped process) fails the others within it.
TEST(SaveWaiting, ASlowWriterIsWaitedForAndAStoppedRankIsNot) {
  const auto root = std::filesystem::path(::testing::TempDir()) / "own_waiting";
  std::filesystem::remove_all(root);
  SaveOptions options;
  options.run_id = kRun;
  options.timeout = std::chrono::milliseconds(250);
  // Rank 1 writes and fsyncs 256 MB (0.6 to 1.2 s on this disk), more where that is faster
  // than the timeout (a tmpfs), so that its write outlasts several timeouts.
  double slow_seconds = 0;
  for (std::int64_t big = std::int64_t{64} << 20;
       slow_seconds <= 0.25 && big <= (std::int64_t{256} << 20); big *= 2) {
    // Made before the ranks start: filling them must not count as the rank's absence.
    const std::vector<float> small(1, 1.0F);
    const std::vector<float> large(static_cast<std::size_t>(big), 1.0F);
    run_local(2, [&](Communicator& comm) {
      const std::vector<float>& values = comm.rank() == 1 ? large : small;
      const ShardIndex box = comm.rank() == 0 ? ShardIndex{{0, 1}} : ShardIndex{{1, big + 1}};
      const BlockToSave block{"x", {big + 1}, DType::kF32,
                              "",  box,       std::as_bytes(std::span(values))};
      const SaveStats stats = save_checkpoint(comm, root / "slow", {&block, 1}, "{}", options);
      if (comm.rank() == 1) slow_seconds = stats.write_seconds;
    });
    EXPECT_TRUE(std::filesystem::exists(root / "slow" / "index.json"));
    std::filesystem::remove_all(root / "slow");
  }
  EXPECT_GT(slow_seconds, 0.25) << "no write was slow enough to show the waiting";
  std::mutex mutex;
  std::vector<std::string> errors;
  const auto start = std::chrono::steady_clock::now();
  try {
    run_local(2, [&](Communicator& comm) {
      std::vector<float> values(6, 1.0F);
      const BlockToSave block{"x",
                              {12},
                              DType::kF32,
                              "",
                              {{6 * comm.rank(), 6 * comm.rank() + 6}},
                              std::as_bytes(std::span(values))};
      CheckpointSave save(comm, root / "stopped", {&block, 1}, "{}", options);
      save.write_in_background({block.bytes});
      // Rank 1 stops answering for eight timeouts.
      if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(2));
      try {
        (void)save.commit();
      } catch (const Error& e) {
        const std::lock_guard lock(mutex);
        errors.emplace_back(e.what());
        throw;
      }
    });
  } catch (const Error&) {
  }
  ASSERT_FALSE(errors.empty());
  EXPECT_THAT(errors.front(), HasSubstr("did not arrive within 250 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(std::filesystem::exists(root / "stopped"));
}

}  // namespace
}  // namespace shardwise::ckpt

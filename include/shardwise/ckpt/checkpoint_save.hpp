#pragma once
// Saving a checkpoint from every rank at once: each distinct block of an array is written once,
// by one of the ranks that hold it (in turn, block by block), into that rank's own safetensors
// file; rank 0 writes the
// index last. The folder appears whole or not at all: everything is written into a temporary
// folder beside it (".NAME.partial"), files and folder are fsynced, and the rename that makes it
// `folder` comes after the index. A save that fails on any rank fails on every rank with the
// same message, and leaves what was at `folder` before.
//
// A save is three steps, so that the writing can run on another thread while training goes on
// (an asynchronous save): the constructor and commit() are collective over the communicator,
// write() is this rank's alone.
//
// A save belongs to a run (SaveOptions::run_id, recorded in the index): it replaces at `folder`
// only a checkpoint of the same run, and refuses anything else there, which it leaves as it is
// (checkpoint_folders.hpp). Its temporary folder's name holds the run's id, so that two runs
// saving the same step never share one, and a folder that appears at `folder` while the save
// is written (another run's) is never replaced: the rename into place refuses it.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "shardwise/ckpt/array_block.hpp"
#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/comm/communicator.hpp"

namespace shardwise::ckpt {

struct SaveOptions {
  std::uint64_t chunk_bytes = std::uint64_t{1} << 20;  // one CRC-32C per chunk
  // The run saving (is_run_id), rank 0's counts; empty: a run of its own, new_run_id().
  std::string run_id;
  // The runs it continues, recorded in the index (rank 0's).
  std::vector<RunAncestor> ancestors;
  // How long a rank waits at a collective step for the others, as the runtime's operations
  // do. A slow disk does not count against it: while any rank still writes, every rank takes
  // part in a small all-reduce every few milliseconds (commit()), so only a rank that stopped
  // answering fails the save.
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
};

struct SaveStats {
  std::uint64_t bytes_written = 0;  // by this rank, data and header
  std::uint64_t bytes_total = 0;    // every shard's bytes
  double write_seconds = 0;         // this rank's write()
};

class CheckpointSave {
 public:
  // Collective over every rank of `comm`, each with its blocks (their bytes are not read here):
  // decides who writes each distinct block, checks that every array's blocks tile it and that
  // ranks agree on its shape and dtype, and makes the temporary folder (removing one an earlier
  // save left). Throws CheckpointError on every rank where any of that fails.
  CheckpointSave(Communicator& comm, std::filesystem::path folder,
                 std::span<const BlockToSave> blocks, std::string metadata_json,
                 SaveOptions options = {});
  // A save never committed (a failure on any rank, a peer that aborted the run, a save
  // abandoned) leaves no temporary folder: rank 0, which made it, removes it here.
  ~CheckpointSave();
  CheckpointSave(const CheckpointSave&) = delete;
  CheckpointSave& operator=(const CheckpointSave&) = delete;

  // The blocks this rank writes: indices into the constructor's blocks.
  [[nodiscard]] const std::vector<std::size_t>& written_here() const { return mine_; }
  // The run's id every rank saves under (rank 0's SaveOptions::run_id, or the one it made).
  [[nodiscard]] const std::string& run_id() const { return run_id_; }
  // Writes this rank's file: one span per written_here() block, in its order, of that block's
  // bytes (the constructor's or a copy of them). Does not throw: what fails is kept for commit.
  // May run on another thread than commit(), which waits for it once it has begun.
  void write(std::span<const std::span<const std::byte>> bytes) noexcept;
  // write() on a thread of its own; the bytes must outlive commit() (or the object).
  void write_in_background(std::vector<std::span<const std::byte>> bytes);
  // Collective, one small all-reduce: whether every rank's write() has finished.
  [[nodiscard]] bool every_rank_wrote();
  // Collective: waits until every rank has written (each taking part in the waiting, see
  // SaveOptions::timeout); then, where every rank wrote, rank 0 writes the index and renames
  // the folder into place; otherwise removes the temporary folder. Throws CheckpointError on
  // every rank where any rank failed, naming it and why.
  SaveStats commit();

 private:
  struct Block;
  // Every array of the blocks, without shards, by name.
  [[nodiscard]] std::map<std::string, ArrayRecord> array_records() const;
  // Rank 0: removes the temporary folder if it made it and has not moved it into place.
  void remove_partial() noexcept;
  Communicator& comm_;
  std::filesystem::path folder_;
  std::string run_id_;
  std::filesystem::path partial_;
  std::string metadata_json_;
  SaveOptions options_;
  std::vector<Block> blocks_;               // every distinct block of every rank, with its writer
  std::vector<std::size_t> mine_;           // of the caller's blocks, those this rank writes
  std::vector<std::size_t> mine_distinct_;  // their entries in blocks_
  std::string records_;  // what write() wrote, for commit: one JSON object per line
  std::string error_;    // what write() could not do
  SaveStats stats_;
  std::vector<std::span<const std::byte>> background_bytes_;
  std::thread writer_;
  std::atomic<bool> write_started_{false};
  std::atomic<bool> written_{false};
  bool committed_ = false;
  bool made_partial_ = false;  // rank 0 made partial_, and it is not in place yet
};

// Constructs, writes (on a thread of its own, while this one answers the others) and commits.
SaveStats save_checkpoint(Communicator& comm, const std::filesystem::path& folder,
                          std::span<const BlockToSave> blocks, const std::string& metadata_json,
                          const SaveOptions& options = {});

}  // namespace shardwise::ckpt

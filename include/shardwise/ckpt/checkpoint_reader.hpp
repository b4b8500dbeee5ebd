#pragma once
// Reading a checkpoint into any layout: each rank asks for its blocks (BlockToLoad), and reads
// of each saved shard only the chunks that overlap them, checking every chunk's CRC-32C before
// its bytes are used. Not collective: load_checkpoint() adds the agreement every rank needs.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/ckpt/array_block.hpp"
#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/comm/communicator.hpp"

namespace shardwise::ckpt {

struct ReadStats {
  std::uint64_t bytes_read = 0;    // from the files, whole chunks
  std::uint64_t bytes_needed = 0;  // of them, the targets' bytes
};

// A .safetensors file's header (its JSON text, at most 100 MB, as the length prefix says) and
// the bytes of data after it: CheckpointError naming the file where the prefix claims more
// than the file or the bound holds. The one reader of the prefix (CheckpointReader uses it).
[[nodiscard]] std::pair<std::string, std::uint64_t> read_safetensors_header(
    const std::filesystem::path& path);

class CheckpointReader {
 public:
  // Reads and checks `folder`/index.json (CheckpointError naming what is wrong; a folder
  // without one, such as an interrupted save's, is "not a checkpoint").
  explicit CheckpointReader(std::filesystem::path folder);
  // A .safetensors file read as a checkpoint: each tensor an array of one shard, without
  // checksums (a file from elsewhere: Hugging Face's).
  static CheckpointReader from_safetensors(const std::filesystem::path& file);

  [[nodiscard]] const CheckpointIndex& index() const { return index_; }
  [[nodiscard]] const std::filesystem::path& folder() const { return folder_; }
  // The CRC-32C of index.json's bytes (0 for a data file read as a checkpoint): ranks that
  // resolved a path to checkpoints of the same bytes agree on it.
  [[nodiscard]] std::uint32_t index_checksum() const { return index_crc32c_; }

  // Fills every target's bytes (its box of its array, row-major). A target whose array the
  // checkpoint lacks, or has with another shape or dtype, is a CheckpointError naming it; so is
  // a chunk whose checksum differs (naming file, array, shard and byte range) or a file shorter
  // than the index says.
  ReadStats read(std::span<const BlockToLoad> targets) const;

  // Checks, without reading their bytes, that every data file the index names is a regular file
  // of the folder (not a symlink) at least as long as its shards reach: before a caller
  // allocates what the index promises.
  void check_files() const;

  // Reads every shard whole, checking every checksum, and that each data file is a safetensors
  // file holding its shards where the index says. Returns the bytes read.
  std::uint64_t verify() const;

 private:
  CheckpointReader(std::filesystem::path folder, CheckpointIndex index);
  std::filesystem::path folder_;
  CheckpointIndex index_;
  std::uint32_t index_crc32c_ = 0;
};

// Throws CheckpointError where the checkpoint lacks one of `wanted` or holds an array none of
// them names, listing them (the first few, and how many more).
void require_arrays(const CheckpointIndex& index, const std::vector<std::string>& wanted,
                    const std::string& what);

// Collective over every rank of `comm`: throws CheckpointError alike on every rank where any
// rank's `my_error` is not empty, naming the first such rank and its error, prefixed by `what`.
void throw_unless_all_succeeded(Communicator& comm, const std::string& my_error,
                                const std::string& what);

// Collective over every rank of `comm`: throws CheckpointError alike on every rank where a
// rank's `mine` differs from rank 0's (which checkpoint each resolved a folder to: a host whose
// file system shows an older listing must not load another step), naming both.
void require_same_on_every_rank(Communicator& comm, const std::string& mine,
                                const std::string& what);

// Collective over every rank of `comm`: each reads its targets; then every rank learns whether
// all did, and throws CheckpointError alike where any failed, naming the first that did.
ReadStats load_checkpoint(Communicator& comm, const CheckpointReader& reader,
                          std::span<const BlockToLoad> targets);

}  // namespace shardwise::ckpt

#pragma once
// What a checkpoint folder's index.json says: every array (its global shape, dtype and the
// sharding it was saved with) and where each of its shards' bytes are: a file of the folder, an
// offset and a length, and a CRC-32C of every chunk of chunk_bytes (the last one shorter), so
// that a reader that needs part of a shard reads and verifies only the chunks holding it. The
// metadata (step, model, settings, data position) is a JSON object the writer hands in.
//
// A parsed index is consistent: names unique, shards inside their array and together covering
// it exactly once, each shard's length its box's bytes, checksums one per chunk, no two shards
// sharing a file's bytes, file names plain names of the folder.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise::ckpt {

inline constexpr int kIndexFormatVersion = 1;
inline constexpr char kIndexFileName[] = "index.json";
// Bounds on what an index may describe (checked as it is read).
inline constexpr std::size_t kMaxIndexBytes = std::size_t{1} << 30;
inline constexpr std::size_t kMaxArrays = 1'000'000;
inline constexpr std::size_t kMaxShardsPerArray = 1'000'000;
// A chunk's bytes, where a shard has checksums: bounded above so that a reader's window (at
// least a chunk) stays small whatever an index says.
inline constexpr std::uint64_t kMinChunkBytes = 1;
inline constexpr std::uint64_t kMaxChunkBytes = std::uint64_t{256} << 20;

struct ShardRecord {
  ShardIndex box;            // the part of the global array it holds, one range per dimension
  std::string file;          // a file of the checkpoint folder
  std::uint64_t offset = 0;  // from the file's start
  std::uint64_t length = 0;  // bytes: the box's elements x the dtype's size, row-major
  // 0: no checksums (a file from elsewhere read as a checkpoint; never in an index.json)
  std::uint64_t chunk_bytes = 0;
  std::vector<std::uint32_t> crc32c;  // one per chunk
};

struct ArrayRecord {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
  std::string sharding;  // how it was laid out when saved, in words
  std::vector<ShardRecord> shards;
};

// A run a later one continues (--resume): its id and the step the continuation took from it.
struct RunAncestor {
  std::string run_id;
  std::int64_t step = 0;
  friend bool operator==(const RunAncestor&, const RunAncestor&) = default;
};
inline constexpr std::size_t kMaxAncestors = 10'000;

struct CheckpointIndex {
  std::vector<ArrayRecord> arrays;  // in name order
  std::string metadata_json = "{}";
  // The run that saved it (is_run_id; every invocation, a --resume too, is a run of its own):
  // what a later save of the same run may replace or remove. Empty for a checkpoint of no
  // recorded run (saved by a version that did not record runs), which no save replaces or
  // removes.
  std::string run_id;
  // The runs it continues, oldest first (its --resume's lineage and that checkpoint's run):
  // --keep may remove their checkpoints up to the step each was continued from.
  std::vector<RunAncestor> ancestors;

  // The array called `name`, or nullptr.
  [[nodiscard]] const ArrayRecord* find(std::string_view name) const;
  // Bytes of every shard.
  [[nodiscard]] std::uint64_t total_bytes() const;
};

// A run's id: 32 lowercase hex digits (128 random bits).
[[nodiscard]] bool is_run_id(std::string_view text);
[[nodiscard]] std::string new_run_id();

// Throws CheckpointError naming the field and value (the index is `what`, a path in messages)
// for anything inconsistent above, invalid JSON, a version other than kIndexFormatVersion, a
// shard without checksums (every index shardwise writes has them; only a data file read as a
// checkpoint, CheckpointReader::from_safetensors, has none).
[[nodiscard]] CheckpointIndex parse_checkpoint_index(std::string_view text,
                                                     const std::string& what);
[[nodiscard]] std::string checkpoint_index_json(const CheckpointIndex& index);

// Throws CheckpointError where `index`'s arrays are not consistent (as parse_checkpoint_index
// checks them); for an index made in memory.
void check_consistent(const CheckpointIndex& index, const std::string& what);

}  // namespace shardwise::ckpt

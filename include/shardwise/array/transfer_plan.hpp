#pragma once
// Which pieces of an array move between which ranks when it changes sharding: the
// intersections of source and target blocks, each sent once by one holder.

#include <cstdint>
#include <optional>
#include <vector>

#include "shardwise/comm/group.hpp"
#include "shardwise/core/named_sharding.hpp"

namespace shardwise {

struct Transfer {
  Rank from = 0;
  Rank to = 0;     // from == to: a local copy
  ShardIndex box;  // global coordinates
  friend bool operator==(const Transfer&, const Transfer&) = default;
};

// A block of the global array some rank holds (a shard, a checkpoint file's tensor slice, the
// whole array on a scatter's root).
struct SourceBlock {
  Rank holder = 0;
  ShardIndex box;
};

// A block of the global array a rank wants (a layout's block that no one sharding describes: a
// tensor-parallel block cut further by ZeRO).
struct TargetBlock {
  Rank receiver = 0;
  ShardIndex box;
};

// For each target block in order, its pieces: from the receiver itself where one of its own
// source blocks holds them, else from a holder of a block that does, chosen in turn among the
// holders of equal blocks (source blocks in the order given). Where sources tile the array
// (a checkpoint's shards), the pieces tile each target block. A pure function of its arguments.
std::vector<Transfer> plan_transfers(const std::vector<SourceBlock>& sources,
                                     const std::vector<TargetBlock>& targets);

// For every receiving rank (every device of `target`'s mesh, or only `only_to`), the pieces of
// its target block: from itself where one of its own source blocks holds them, else from a
// holder of a block that does, chosen in turn among the holders of equal blocks. Sources need
// not come from a sharding nor cover the same devices. A pure function of its arguments.
std::vector<Transfer> plan_transfers(const std::vector<SourceBlock>& sources,
                                     const NamedSharding& target, const Shape& global_shape,
                                     std::optional<Rank> only_to = std::nullopt);

// For every receiving rank (every device of the target mesh, or only `only_to`), the pieces of
// its target block: from itself where its source block holds them, else from one rank holding
// that source block, chosen in turn among the holders. Both shardings must be on meshes with
// the same devices. The plan is a pure function of its arguments, so every rank computes the
// same one.
std::vector<Transfer> plan_transfers(const NamedSharding& source, const NamedSharding& target,
                                     const Shape& global_shape,
                                     std::optional<Rank> only_to = std::nullopt);

// Bytes that cross between ranks in a plan (local copies excluded).
std::int64_t bytes_moved(const std::vector<Transfer>& plan, std::size_t element_bytes);

}  // namespace shardwise

#pragma once
// A reshard compiled for one rank: which collective moves the data (along which axes), the
// boxes each member contributes, and staging preallocated for it. Compiled once per (source,
// target, shape, dtype, partial axes) and reused (Resharder keeps them).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shardwise/array/sharded_array.hpp"
#include "shardwise/array/transfer_plan.hpp"

namespace shardwise::detail {

enum class ReshardKind {
  kLocal,          // nothing crosses ranks: each rank copies its target block out of its source
  kAllGather,      // Shard -> Replicate along some axes of one dimension
  kAllToAll,       // Shard(i) -> Shard(j) along one axis
  kReduceScatter,  // Partial -> Shard along the partial axes
  kAllReduce,      // Partial -> Replicate (the same spec, nothing pending)
  kTransfer,       // anything else: pieces sent once, by one holder each
};

std::string to_string(ReshardKind kind);

struct ReshardPlan {
  ReshardKind kind = ReshardKind::kTransfer;
  ShardIndex source_index;
  ShardIndex target_index;
  // The collective's group (kAllGather, kAllToAll, kReduceScatter, kAllReduce), labelled with
  // its axes in mesh order; for kTransfer, the ranks that send or receive anything.
  Group group;
  // kAllGather: members' source blocks in group order; kAllToAll: the box this rank sends to
  // each member (send_boxes) and the box it receives from each (receive_boxes).
  std::vector<ShardIndex> send_boxes;
  std::vector<ShardIndex> receive_boxes;
  // kAllToAll: every member's source block, where its pieces are read from peers' memory.
  std::vector<ShardIndex> member_source_index;
  // kAllGather into the target buffer itself (the blocks lie one after another there).
  bool direct = false;
  // kReduceScatter and kAllToAll: whether the pieces must be packed first (else the source
  // block is the collective's input); kAllToAll: whether they must be unpacked after (else
  // the target block is its output). kReduceScatter: the reduction.
  ReduceOp op = ReduceOp::kSum;
  bool pack = false;
  bool unpack = false;
  std::size_t dim = 0;
  // kTransfer: this rank's pieces and the all_to_allv layouts over `group`.
  std::vector<Transfer> transfers;
  BlockLayout send;
  BlockLayout receive;
  std::vector<std::string> member_axes;
  // Reused across runs.
  std::vector<std::byte> staging_in;
  std::vector<std::byte> staging_out;
};

// Compiles the reshard of `array`'s layout into `target` for this rank. Every rank of the
// mesh compiles the same plan for itself.
ReshardPlan compile_reshard(const ShardedArray& array, const NamedSharding& target);

// Runs a plan: `out` is this rank's target block.
void run_reshard(Communicator& comm, ReshardPlan& plan, const ShardedArray& array, std::byte* out);

// A plan of pieces (plan_transfers' output) for rank `me`: its own pieces, and the layouts of
// one all_to_allv over the ranks that send or receive, labelled by the mesh axes each peer
// differs in.
ReshardPlan compile_transfers(const std::vector<Transfer>& all, Rank me, const Mesh& mesh,
                              DType dtype, ShardIndex source_index, ShardIndex target_index);

// Where each rank's source block lies in the global array.
using SourceIndexOf = std::function<ShardIndex(Rank)>;

// Runs a plan of pieces: `source` is this rank's source block (at source_index_of(me)).
void run_transfers(Communicator& comm, ReshardPlan& plan, const std::byte* source,
                   const SourceIndexOf& source_index_of, DType dtype, std::byte* out);

}  // namespace shardwise::detail

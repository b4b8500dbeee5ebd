#pragma once
// Placements: the per-mesh-axis view of a sharding, as PyTorch DTensor has it. For every mesh
// axis, Shard(dim) (the axis splits tensor dimension dim), Replicate(), or Partial(op) (each
// device holds a partial value awaiting a reduction over the axis; arrays only, never specs).

#include <cstddef>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"

namespace shardwise {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

// "sum", "avg", "max", "min".
std::string to_string(ReduceOp op);
// Throws ParseError naming the text for anything else.
ReduceOp parse_reduce_op(std::string_view text);

struct Replicate {
  friend bool operator==(const Replicate&, const Replicate&) = default;
};

struct Shard {
  int dim = 0;
  // Where this axis stands among the axes that split `dim`, 0 = most major. -1 (the default)
  // orders them by mesh axis order, as DTensor does; a PartitionSpec tuple in another order
  // converts to explicit positions.
  int position = -1;
  friend bool operator==(const Shard&, const Shard&) = default;
};

struct Partial {
  ReduceOp op = ReduceOp::kSum;
  friend bool operator==(const Partial&, const Partial&) = default;
};

using Placement = std::variant<Replicate, Shard, Partial>;
using Placements = std::vector<Placement>;

// "Shard(dim=0)", "Shard(dim=0, position=1)", "Replicate()", "Partial(sum)".
std::string to_string(const Placement& placement);
// "(Shard(dim=0), Replicate())".
std::string to_string(const Placements& placements);

// One placement per mesh axis. Throws ShardingError for a spec that names an unknown axis or
// uses one twice.
Placements to_placements(const Mesh& mesh, const PartitionSpec& spec);

// The spec the placements describe; trailing replicated dimensions are left out unless `rank`
// is given, in which case the spec has exactly `rank` entries and Shard(-k) counts from the end.
// Throws ShardingError when the count differs from the mesh's axes, a dimension is out of
// range, positions are inconsistent, or an axis is Partial (a spec cannot hold a pending
// reduction).
PartitionSpec to_partition_spec(const Mesh& mesh, const Placements& placements,
                                std::optional<std::size_t> rank = std::nullopt);

}  // namespace shardwise

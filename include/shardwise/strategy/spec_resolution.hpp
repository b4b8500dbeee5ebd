#pragma once
// What placing one tensor's logical axes on a mesh decided: the partition spec, and every mesh
// axis a rule asked for that had to move to another dimension or be left out, in words. Every
// entry point that answers "which spec does this tensor get" (a strategy, a combination of
// strategies, logical-axis rules, create_partition_spec, a model layout) returns this, from
// one resolver (LogicalAxisRules::resolve).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/named_sharding.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise {

// Elements per indivisible unit of a logical axis, such as "heads" -> head_dim: a dimension
// with that name is split only between units, never inside one (a tensor-parallel rank holds
// whole attention heads). Names without an entry have a unit of 1.
using AxisUnits = std::map<std::string, std::int64_t>;

struct ResolveOptions {
  // Without a shape every rule fits (Flax's logical_to_mesh_axes); with one, a rule fits a
  // dimension only when its shards divide it (and its units) and the dimension is at least
  // the rule's min_size.
  std::optional<Shape> shape;
  AxisUnits units;
  // kUneven: axes need not divide a dimension (torch.chunk shards); units still must divide.
  Evenness evenness = Evenness::kStrict;
  // An axis that would be moved or dropped is an error (ShardingError) instead of a note.
  bool strict = false;
};

struct SpecResolution {
  PartitionSpec spec;
  // One line per mesh axis a rule asked for that the spec has elsewhere (moved) or not at all
  // (dropped), saying why.
  std::vector<std::string> notes;
  // Axes asked for that the spec does not use.
  std::vector<std::string> dropped_axes;
  friend bool operator==(const SpecResolution&, const SpecResolution&) = default;
};

}  // namespace shardwise

#pragma once
// The abstract sharding strategy of the reference module: a strategy owns one mesh axis and
// maps the logical dimension names of a tensor ("batch", "hidden", "out_features", ...) to it.

#include <optional>
#include <string>
#include <vector>

#include "shardwise/array/sharded_array.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/strategy/logical_axes.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"

namespace shardwise {

enum class StrategyKind {
  kDataParallel,
  kFsdp,
  kTensorParallel,
  kPipelineParallel,
  kExpertParallel
};

// "data_parallel", "fsdp", "tensor_parallel", "pipeline_parallel", "expert_parallel".
std::string to_string(StrategyKind kind);

// How strongly a strategy holds the dimensions it claims: when several strategies claim one
// logical name, the higher priority's axis is the major one on it, and the one that stays when
// the dimension cannot take both. Tensor parallelism is first (the reference keeps 'model'
// over the rest); data parallelism comes before FSDP, which it meets only on the batch, where
// 'data' is the major axis as in MaxText's ('data', 'fsdp'). Expert parallelism meets them on the
// batch too, as its minor axis.
enum class ClaimPriority : int { kPipeline = 0, kExpert = 1, kFsdp = 2, kData = 3, kTensor = 4 };
ClaimPriority claim_priority(StrategyKind kind);

// A logical name a strategy splits over mesh axes: one logical-axis rule, with a priority.
struct AxisClaim {
  std::string logical_name;
  std::vector<std::string> mesh_axes;
  ClaimPriority priority = ClaimPriority::kData;
  std::int64_t min_size = 0;
  bool relocatable = false;
  friend bool operator==(const AxisClaim&, const AxisClaim&) = default;
};

// The logical-axis rules of claims, in the order of each name's first claim. A name claimed
// once gets its rule; a name claimed by several gets the rule of all their axes (highest
// priority major, then in claim order), followed by each claim's own rule in that order, so
// that whichever part fits a shape applies.
LogicalAxisRules rules_from_claims(const std::vector<AxisClaim>& claims);

struct ShardingConstraints {
  std::string axis_name;
  // The mesh axis index the strategy was built for; nullopt: wherever axis_name is.
  std::optional<int> mesh_axis;
  friend bool operator==(const ShardingConstraints&, const ShardingConstraints&) = default;
};

class ShardingStrategy {
 public:
  // Throws InvalidArgument for an axis name that is not an identifier or a negative mesh_axis.
  ShardingStrategy(std::string axis_name, std::optional<int> mesh_axis);
  virtual ~ShardingStrategy() = default;
  ShardingStrategy(const ShardingStrategy&) = default;
  ShardingStrategy& operator=(const ShardingStrategy&) = default;
  ShardingStrategy(ShardingStrategy&&) = default;
  ShardingStrategy& operator=(ShardingStrategy&&) = default;

  [[nodiscard]] virtual StrategyKind kind() const = 0;

  // The logical names this strategy splits over its axis, as rules: the one description of
  // the strategy from which its specs, and those of every combination it is part of, follow.
  [[nodiscard]] virtual std::vector<AxisClaim> axis_claims() const = 0;
  [[nodiscard]] LogicalAxisRules logical_axis_rules() const;

  // The spec this strategy gives a tensor whose dimensions carry these logical names.
  [[nodiscard]] PartitionSpec get_partition_spec(const LogicalAxes& dim_names) const;

  // The same for a tensor on a mesh, fitted to a shape, with what could not be done in notes:
  // what this strategy alone does with it, and what a MultiDimensionalStrategy of this strategy
  // alone returns. Throws ShardingError when the mesh lacks the axis or has it elsewhere.
  [[nodiscard]] SpecResolution resolve(const std::string& tensor_name, const LogicalAxes& dim_names,
                                       const Mesh& mesh, const ResolveOptions& options = {}) const;

  // The sharding an array of this shape gets on this mesh (validated against the shape). The
  // runtime places real shards with it.
  [[nodiscard]] virtual NamedSharding apply_sharding(const Shape& shape,
                                                     const Mesh& mesh) const = 0;

  // Places a host array with that sharding on the runtime (collective over `comm`): from
  // `root` by a scatter, or, without a root, from the copy every rank holds (no traffic).
  [[nodiscard]] ShardedArray apply_sharding(Communicator& comm, const void* host,
                                            const Shape& shape, DType dtype, const Mesh& mesh,
                                            std::optional<Rank> root = std::nullopt) const;

  [[nodiscard]] ShardingConstraints get_sharding_constraints() const;
  [[nodiscard]] const std::string& axis_name() const { return axis_name_; }
  [[nodiscard]] std::optional<int> mesh_axis() const { return mesh_axis_; }

 protected:
  // The size of this strategy's axis in `mesh`. Throws ShardingError when the mesh has no such
  // axis, or has it at another index than mesh_axis.
  [[nodiscard]] std::int64_t axis_size_in(const Mesh& mesh) const;
  // A validated sharding of `shape` with `spec`.
  [[nodiscard]] static NamedSharding sharding_for(const Mesh& mesh, PartitionSpec spec,
                                                  const Shape& shape);

 private:
  std::string axis_name_;
  std::optional<int> mesh_axis_;
};

}  // namespace shardwise

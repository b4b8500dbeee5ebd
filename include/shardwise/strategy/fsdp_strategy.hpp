#pragma once
// Fully sharded data parallelism (ZeRO-3 / FSDP): every large enough parameter is split along
// its first dimension over the axis; each rank gathers it when it computes with it.

#include <cstdint>
#include <string>

#include "shardwise/core/named_sharding.hpp"
#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

// What FSDP does with a weight whose first dimension the axis does not divide.
enum class FsdpFallback {
  kReplicate,            // keep it whole on every rank (the default)
  kShardOtherDimension,  // shard the first later dimension the axis divides, else replicate
  // As kShardOtherDimension, and where the axis divides no dimension, dimension 0 in uneven
  // blocks (torch.chunk: ceil(rows / n) each, the last ones smaller or empty), as FSDP2 does.
  kShardOtherDimensionElseUneven,
};

// Where FSDP puts one parameter, and why, in words.
struct FsdpDecision {
  PartitionSpec spec;
  std::string reason;
  // kUneven where the split does not divide the dimension (FsdpFallback's last resort).
  Evenness evenness = Evenness::kStrict;
};

class FSDPStrategy final : public ShardingStrategy {
 public:
  explicit FSDPStrategy(std::string axis_name = "fsdp", std::optional<int> mesh_axis = std::nullopt,
                        std::int64_t min_weight_size = 1024,
                        FsdpFallback fallback = FsdpFallback::kReplicate);

  // FSDP that splits every parameter it can, as PyTorch FSDP2 does: minimum weight size 1, a
  // dimension 0 the axis does not divide gives way to a later dimension it divides, and where
  // it divides none, dimension 0 is split unevenly. The trainer's default ZeRO layout, and what
  // the planner counts with.
  static FSDPStrategy splitting_every_parameter(std::string axis_name);

  [[nodiscard]] StrategyKind kind() const override { return StrategyKind::kFsdp; }
  [[nodiscard]] std::int64_t min_weight_size() const { return min_weight_size_; }
  [[nodiscard]] FsdpFallback fallback() const { return fallback_; }

  // The reference's rule: shape[0] >= min_weight_size. Scalars are never sharded.
  [[nodiscard]] bool should_shard_weight(const Shape& shape) const;

  // The batch (FSDP ranks are data-parallel ranks), then the first of "out_features", "embed",
  // "hidden", "features" the tensor has, over the axis; the weight names only for dimensions
  // of at least min_weight_size elements, and relocatable with kShardOtherDimension.
  [[nodiscard]] std::vector<AxisClaim> axis_claims() const override;
  // Gradients are sharded as their weights (reduce-scatter lands them there).
  [[nodiscard]] PartitionSpec get_gradient_partition_spec(const LogicalAxes& dim_names) const;

  // The rules for an unnamed parameter of this shape on an axis of this size, its dimension 0
  // taken as the one to split (as the reference does): scalars and weights below the minimum
  // are replicated; a divisible dimension 0 is sharded; otherwise the fallback. The same
  // resolver as every named spec decides it.
  [[nodiscard]] FsdpDecision decide(const Shape& shape, std::int64_t axis_size) const;
  [[nodiscard]] NamedSharding apply_sharding(const Shape& shape, const Mesh& mesh) const override;
  using ShardingStrategy::apply_sharding;

 private:
  std::int64_t min_weight_size_;
  FsdpFallback fallback_;
};

}  // namespace shardwise

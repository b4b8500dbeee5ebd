#pragma once
// Expert parallelism (GShard, DeepSpeed-MoE's ep_size, torchtitan's and MaxText's 'expert' axis):
// a Mixture-of-Experts layer's experts are split over the axis, each rank holding E / ep of them,
// and every token is sent to the ranks holding the experts it chose. The axis splits the batch as
// well (its ranks see different tokens in attention and the dense parts, whose parameters it
// replicates), as Megatron-LM's folding and torchtitan's ep borrowed from the data ranks do.

#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

class ExpertParallelStrategy final : public ShardingStrategy {
 public:
  explicit ExpertParallelStrategy(std::string axis_name = "expert",
                                  std::optional<int> mesh_axis = std::nullopt);

  [[nodiscard]] StrategyKind kind() const override { return StrategyKind::kExpertParallel; }
  // The dimension named "experts" (a stacked expert weight's first) over the axis, and "batch"
  // (after the data axes, as the minor part of the batch's split).
  [[nodiscard]] std::vector<AxisClaim> axis_claims() const override;
  // Dimension 0 over the axis, the experts of a stacked weight (scalars stay replicated).
  [[nodiscard]] NamedSharding apply_sharding(const Shape& shape, const Mesh& mesh) const override;
  using ShardingStrategy::apply_sharding;
};

}  // namespace shardwise

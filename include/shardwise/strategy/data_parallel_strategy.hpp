#pragma once
// Data parallelism: the batch is split over the axis; parameters are replicated.

#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

class DataParallelStrategy final : public ShardingStrategy {
 public:
  explicit DataParallelStrategy(std::string axis_name = "data",
                                std::optional<int> mesh_axis = std::nullopt);

  [[nodiscard]] StrategyKind kind() const override { return StrategyKind::kDataParallel; }
  // The dimension named "batch" over the axis; every other dimension replicated.
  [[nodiscard]] std::vector<AxisClaim> axis_claims() const override;
  // Dimension 0 over the axis (scalars stay replicated).
  [[nodiscard]] NamedSharding apply_sharding(const Shape& shape, const Mesh& mesh) const override;
  using ShardingStrategy::apply_sharding;
};

}  // namespace shardwise

#include "shardwise/strategy/data_parallel_strategy.hpp"

namespace shardwise {

DataParallelStrategy::DataParallelStrategy(std::string axis_name, std::optional<int> mesh_axis)
    : ShardingStrategy(std::move(axis_name), mesh_axis) {}

std::vector<AxisClaim> DataParallelStrategy::axis_claims() const {
  return {{"batch", {axis_name()}, ClaimPriority::kData}};
}

NamedSharding DataParallelStrategy::apply_sharding(const Shape& shape, const Mesh& mesh) const {
  (void)axis_size_in(mesh);
  return sharding_for(mesh, shape.empty() ? P() : P{axis_name()}, shape);
}

}  // namespace shardwise

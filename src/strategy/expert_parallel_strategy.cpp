#include "shardwise/strategy/expert_parallel_strategy.hpp"

namespace shardwise {

ExpertParallelStrategy::ExpertParallelStrategy(std::string axis_name, std::optional<int> mesh_axis)
    : ShardingStrategy(std::move(axis_name), mesh_axis) {}

std::vector<AxisClaim> ExpertParallelStrategy::axis_claims() const {
  return {{"experts", {axis_name()}, ClaimPriority::kExpert},
          {"batch", {axis_name()}, ClaimPriority::kExpert}};
}

NamedSharding ExpertParallelStrategy::apply_sharding(const Shape& shape, const Mesh& mesh) const {
  (void)axis_size_in(mesh);
  return sharding_for(mesh, shape.empty() ? P() : P{axis_name()}, shape);
}

}  // namespace shardwise

#include "shardwise/strategy/data_parallel_strategy.hpp"

namespace shardwise {

DataParallelStrategy::DataParallelStrategy(std::string axis_name, std::optional<int> mesh_axis)
    : ShardingStrategy(std::move(axis_name), mesh_axis) {}

PartitionSpec DataParallelStrategy::get_partition_spec(const LogicalAxes& dim_names) const {
  std::vector<SpecEntry> entries(dim_names.size());
  for (std::size_t d = 0; d < dim_names.size(); ++d) {
    if (dim_names[d] == "batch") entries[d] = SpecEntry(axis_name());
  }
  return PartitionSpec(std::move(entries));
}

NamedSharding DataParallelStrategy::apply_sharding(const Shape& shape, const Mesh& mesh) const {
  (void)axis_size_in(mesh);
  return sharding_for(mesh, shape.empty() ? P() : P{axis_name()}, shape);
}

}  // namespace shardwise

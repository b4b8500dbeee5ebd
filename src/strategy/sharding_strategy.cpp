#include "shardwise/strategy/sharding_strategy.hpp"

#include "shardwise/array/placement_ops.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

std::string to_string(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kDataParallel: return "data_parallel";
    case StrategyKind::kFsdp: return "fsdp";
    case StrategyKind::kTensorParallel: return "tensor_parallel";
    case StrategyKind::kPipelineParallel: return "pipeline_parallel";
  }
  return "?";
}

ShardingStrategy::ShardingStrategy(std::string axis_name, std::optional<int> mesh_axis)
    : axis_name_(std::move(axis_name)), mesh_axis_(mesh_axis) {
  // A one-axis mesh checks the name the same way every mesh does.
  try {
    (void)Mesh({axis_name_}, {1});
  } catch (const InvalidArgument&) {
    throw InvalidArgument("strategy axis_name '" + axis_name_ +
                          "' is not a valid mesh axis name ([A-Za-z_][A-Za-z0-9_]*)");
  }
  if (mesh_axis_ && *mesh_axis_ < 0) {
    throw InvalidArgument("strategy mesh_axis is " + std::to_string(*mesh_axis_) +
                          "; expected an axis index >= 0");
  }
}

PartitionSpec ShardingStrategy::propose(const LogicalAxes& dim_names,
                                        const Shape& /*shape*/) const {
  return get_partition_spec(dim_names);
}

ShardedArray ShardingStrategy::apply_sharding(Communicator& comm, const void* host,
                                              const Shape& shape, DType dtype, const Mesh& mesh,
                                              std::optional<Rank> root) const {
  const NamedSharding sharding = apply_sharding(shape, mesh);
  return root ? scatter_from(comm, *root, host, shape, dtype, sharding)
              : shard_replicated(comm, host, shape, dtype, sharding);
}

ShardingConstraints ShardingStrategy::get_sharding_constraints() const {
  return {axis_name_, mesh_axis_};
}

std::int64_t ShardingStrategy::axis_size_in(const Mesh& mesh) const {
  if (!mesh.has_axis(axis_name_)) {
    throw ShardingError(to_string(kind()) + " strategy axis '" + axis_name_ + "' is not in " +
                        mesh.to_string());
  }
  const auto index = static_cast<int>(mesh.axis_index(axis_name_));
  if (mesh_axis_ && *mesh_axis_ != index) {
    throw ShardingError(to_string(kind()) + " strategy was built for axis '" + axis_name_ +
                        "' at mesh axis " + std::to_string(*mesh_axis_) + ", but " +
                        mesh.to_string() + " has it at mesh axis " + std::to_string(index));
  }
  return mesh.axis_size(axis_name_);
}

NamedSharding ShardingStrategy::sharding_for(const Mesh& mesh, PartitionSpec spec,
                                             const Shape& shape) {
  NamedSharding sharding(mesh, std::move(spec));
  sharding.validate(shape);
  return sharding;
}

}  // namespace shardwise

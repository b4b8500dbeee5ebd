#include "shardwise/strategy/fsdp_strategy.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

bool is_fsdp_dimension_name(const std::string& name) {
  return name == "out_features" || name == "features" || name == "hidden";
}

PartitionSpec spec_on_dimension(std::size_t dim, const std::string& axis) {
  std::vector<SpecEntry> entries(dim + 1);
  entries[dim] = SpecEntry(axis);
  return PartitionSpec(std::move(entries));
}

}  // namespace

FSDPStrategy::FSDPStrategy(std::string axis_name, std::optional<int> mesh_axis,
                           std::int64_t min_weight_size, FsdpFallback fallback)
    : ShardingStrategy(std::move(axis_name), mesh_axis),
      min_weight_size_(min_weight_size),
      fallback_(fallback) {
  if (min_weight_size_ < 0) {
    throw InvalidArgument("FSDPStrategy min_weight_size is " + std::to_string(min_weight_size_) +
                          "; expected a size >= 0");
  }
}

bool FSDPStrategy::should_shard_weight(const Shape& shape) const {
  return !shape.empty() && shape[0] >= min_weight_size_;
}

PartitionSpec FSDPStrategy::get_partition_spec(const LogicalAxes& dim_names) const {
  std::vector<SpecEntry> entries(dim_names.size());
  if (!dim_names.empty() && is_fsdp_dimension_name(dim_names[0])) {
    entries[0] = SpecEntry(axis_name());
  }
  return PartitionSpec(std::move(entries));
}

PartitionSpec FSDPStrategy::get_gradient_partition_spec(const LogicalAxes& dim_names) const {
  return get_partition_spec(dim_names);
}

PartitionSpec FSDPStrategy::propose(const LogicalAxes& dim_names, const Shape& shape) const {
  if (!should_shard_weight(shape)) return PartitionSpec(std::vector<SpecEntry>(dim_names.size()));
  return get_partition_spec(dim_names);
}

FsdpDecision FSDPStrategy::decide(const Shape& shape, std::int64_t axis_size) const {
  if (shape.empty()) return {P(), "a scalar is replicated"};
  if (!should_shard_weight(shape)) {
    return {P(), "dimension 0 has " + std::to_string(shape[0]) + " rows, below min_weight_size " +
                     std::to_string(min_weight_size_) + ": replicated"};
  }
  if (shape[0] % axis_size == 0) {
    return {P{axis_name()}, "dimension 0 split over '" + axis_name() + "'"};
  }
  const std::string not_divisible = "dimension 0 has " + std::to_string(shape[0]) +
                                    " rows, not divisible by " + std::to_string(axis_size) +
                                    " shards of '" + axis_name() + "'";
  if (fallback_ == FsdpFallback::kShardOtherDimension) {
    for (std::size_t d = 1; d < shape.size(); ++d) {
      if (shape[d] % axis_size == 0 && shape[d] >= axis_size) {
        return {spec_on_dimension(d, axis_name()),
                not_divisible + ": dimension " + std::to_string(d) + " split instead"};
      }
    }
  }
  return {P(), not_divisible + ": replicated"};
}

NamedSharding FSDPStrategy::apply_sharding(const Shape& shape, const Mesh& mesh) const {
  return sharding_for(mesh, decide(shape, axis_size_in(mesh)).spec, shape);
}

}  // namespace shardwise

#include "shardwise/strategy/tensor_parallel_strategy.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

TensorParallelStrategy::TensorParallelStrategy(std::string axis_name, std::optional<int> mesh_axis,
                                               std::optional<std::string> shard_dimension,
                                               WeightLayout layout)
    : ShardingStrategy(std::move(axis_name), mesh_axis),
      shard_dimension_(std::move(shard_dimension)),
      layout_(layout) {
  if (shard_dimension_ && *shard_dimension_ != "in_features" &&
      *shard_dimension_ != "out_features") {
    throw InvalidArgument("TensorParallelStrategy shard_dimension is '" + *shard_dimension_ +
                          "'; expected 'in_features', 'out_features' or none");
  }
}

std::vector<AxisClaim> TensorParallelStrategy::axis_claims() const {
  std::vector<AxisClaim> claims;
  for (const char* name : {shard_dimension_ ? shard_dimension_->c_str() : "hidden", "vocab",
                           "heads", "kv_heads", "mlp", "experts"}) {
    claims.push_back({name, {axis_name()}, ClaimPriority::kTensor});
  }
  return claims;
}

PartitionSpec TensorParallelStrategy::get_linear_weight_spec(LinearKind kind) const {
  // Column-parallel splits out_features; row-parallel splits in_features.
  const bool split_first =
      (kind == LinearKind::kColumnParallel) == (layout_ == WeightLayout::kOutIn);
  return split_first ? P{axis_name(), None} : P{None, axis_name()};
}

PartitionSpec TensorParallelStrategy::get_linear_weight_spec() const {
  const bool row = shard_dimension_ && *shard_dimension_ == "in_features";
  return get_linear_weight_spec(row ? LinearKind::kRowParallel : LinearKind::kColumnParallel);
}

PartitionSpec TensorParallelStrategy::get_attention_qkv_spec() const {
  return get_linear_weight_spec(LinearKind::kColumnParallel);
}

PartitionSpec TensorParallelStrategy::get_attention_output_spec() const {
  return get_linear_weight_spec(LinearKind::kRowParallel);
}

NamedSharding TensorParallelStrategy::apply_sharding(const Shape& shape, const Mesh& mesh) const {
  (void)axis_size_in(mesh);
  if (shape.empty()) return sharding_for(mesh, P(), shape);
  if (shape.size() == 2) return sharding_for(mesh, get_linear_weight_spec(), shape);
  std::vector<SpecEntry> entries(shape.size());
  entries.back() = SpecEntry(axis_name());
  return sharding_for(mesh, PartitionSpec(std::move(entries)), shape);
}

}  // namespace shardwise

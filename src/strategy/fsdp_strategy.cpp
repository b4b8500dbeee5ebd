#include "shardwise/strategy/fsdp_strategy.hpp"

#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// FSDP's weight names, in the order it looks for them.
constexpr const char* kWeightNames[] = {"out_features", "embed", "hidden", "features"};

// The spec without the replicated dimensions at its end, as the reference writes specs.
PartitionSpec trimmed(const PartitionSpec& spec) {
  std::vector<SpecEntry> entries = spec.entries();
  while (!entries.empty() && entries.back().is_replicated()) entries.pop_back();
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

std::vector<AxisClaim> FSDPStrategy::axis_claims() const {
  std::vector<AxisClaim> claims{{"batch", {axis_name()}, ClaimPriority::kFsdp}};
  for (const char* name : kWeightNames) {
    claims.push_back({name,
                      {axis_name()},
                      ClaimPriority::kFsdp,
                      min_weight_size_,
                      fallback_ != FsdpFallback::kReplicate});
  }
  return claims;
}

PartitionSpec FSDPStrategy::get_gradient_partition_spec(const LogicalAxes& dim_names) const {
  return get_partition_spec(dim_names);
}

FSDPStrategy FSDPStrategy::splitting_every_parameter(std::string axis_name) {
  return FSDPStrategy(std::move(axis_name), std::nullopt, 1,
                      FsdpFallback::kShardOtherDimensionElseUneven);
}

FsdpDecision FSDPStrategy::decide(const Shape& shape, std::int64_t axis_size) const {
  if (shape.empty()) return {P(), "a scalar is replicated"};
  if (!should_shard_weight(shape)) {
    return {P(), "dimension 0 has " + std::to_string(shape[0]) + " rows, below min_weight_size " +
                     std::to_string(min_weight_size_) + ": replicated"};
  }
  const std::string split_text = "dimension 0 split over '" + axis_name() + "'";
  // An axis of one device splits nothing, so the resolver ignores it; the reference's answer
  // (dimension 0 over it) is the same layout.
  if (axis_size == 1) return {P{axis_name()}, split_text};
  LogicalAxes names(shape.size());
  names[0] = kWeightNames[0];
  const Mesh mesh({axis_name()}, {axis_size});
  ResolveOptions options;
  options.shape = shape;
  const PartitionSpec spec = trimmed(logical_axis_rules().resolve("", names, mesh, options).spec);
  const int split = spec.dimension_of(axis_name());
  if (split == 0) return {spec, split_text};
  const std::string not_divisible = "dimension 0 has " + std::to_string(shape[0]) +
                                    " rows, not divisible by " + std::to_string(axis_size) +
                                    " shards of '" + axis_name() + "'";
  if (split > 0) {
    return {spec, not_divisible + ": dimension " + std::to_string(split) + " split instead"};
  }
  if (fallback_ == FsdpFallback::kShardOtherDimensionElseUneven) {
    const std::int64_t rows = (shape[0] + axis_size - 1) / axis_size;
    return {P{axis_name()},
            not_divisible + ", nor any other dimension: dimension 0 split unevenly (blocks of " +
                std::to_string(rows) + " rows, the last ones smaller or empty)",
            Evenness::kUneven};
  }
  return {spec, not_divisible + ": replicated"};
}

NamedSharding FSDPStrategy::apply_sharding(const Shape& shape, const Mesh& mesh) const {
  const FsdpDecision decision = decide(shape, axis_size_in(mesh));
  if (decision.evenness == Evenness::kUneven) {
    return NamedSharding(mesh, decision.spec, Evenness::kUneven);
  }
  return sharding_for(mesh, decision.spec, shape);
}

}  // namespace shardwise

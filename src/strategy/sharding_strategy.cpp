#include "shardwise/strategy/sharding_strategy.hpp"

#include <algorithm>

#include "shardwise/array/placement_ops.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

std::string to_string(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kDataParallel: return "data_parallel";
    case StrategyKind::kFsdp: return "fsdp";
    case StrategyKind::kTensorParallel: return "tensor_parallel";
    case StrategyKind::kPipelineParallel: return "pipeline_parallel";
    case StrategyKind::kExpertParallel: return "expert_parallel";
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

ClaimPriority claim_priority(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kTensorParallel: return ClaimPriority::kTensor;
    case StrategyKind::kFsdp: return ClaimPriority::kFsdp;
    case StrategyKind::kDataParallel: return ClaimPriority::kData;
    case StrategyKind::kPipelineParallel: return ClaimPriority::kPipeline;
    case StrategyKind::kExpertParallel: return ClaimPriority::kExpert;
  }
  return ClaimPriority::kPipeline;
}

LogicalAxisRules rules_from_claims(const std::vector<AxisClaim>& claims) {
  std::vector<std::string> names;
  for (const AxisClaim& claim : claims) {
    if (std::find(names.begin(), names.end(), claim.logical_name) == names.end()) {
      names.push_back(claim.logical_name);
    }
  }
  std::vector<LogicalAxisRule> rules;
  for (const std::string& name : names) {
    std::vector<const AxisClaim*> mine;
    for (const AxisClaim& claim : claims) {
      if (claim.logical_name == name) mine.push_back(&claim);
    }
    std::stable_sort(mine.begin(), mine.end(), [](const AxisClaim* a, const AxisClaim* b) {
      return static_cast<int>(a->priority) > static_cast<int>(b->priority);
    });
    if (mine.size() > 1) {
      LogicalAxisRule all{name, {}, 0, false};
      for (const AxisClaim* claim : mine) {
        all.min_size = std::max(all.min_size, claim->min_size);
        for (const std::string& axis : claim->mesh_axes) {
          if (std::find(all.mesh_axes.begin(), all.mesh_axes.end(), axis) == all.mesh_axes.end()) {
            all.mesh_axes.push_back(axis);
          }
        }
      }
      rules.push_back(std::move(all));
    }
    for (const AxisClaim* claim : mine) {
      LogicalAxisRule own{name, claim->mesh_axes, claim->min_size, claim->relocatable};
      if (std::find(rules.begin(), rules.end(), own) == rules.end()) rules.push_back(own);
    }
  }
  return LogicalAxisRules(std::move(rules));
}

LogicalAxisRules ShardingStrategy::logical_axis_rules() const {
  return rules_from_claims(axis_claims());
}

PartitionSpec ShardingStrategy::get_partition_spec(const LogicalAxes& dim_names) const {
  return logical_axis_rules().logical_to_mesh_axes(dim_names);
}

SpecResolution ShardingStrategy::resolve(const std::string& tensor_name,
                                         const LogicalAxes& dim_names, const Mesh& mesh,
                                         const ResolveOptions& options) const {
  (void)axis_size_in(mesh);
  return logical_axis_rules().resolve(tensor_name, dim_names, mesh, options);
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

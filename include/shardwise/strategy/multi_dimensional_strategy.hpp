#pragma once
// Several strategies at once (data + FSDP + tensor + pipeline) over one mesh. Their specs are
// merged per dimension; where two want the same dimension, shardwise never drops one silently:
// it combines both axes there when the size allows, else moves the lower-priority axis to
// another dimension it divides, else reports the axis it had to drop.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/parameter_rules.hpp"
#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

// A merged spec and what merging did, in words.
struct SpecResolution {
  PartitionSpec spec;
  // One line per axis that was combined with another, moved to another dimension, dropped,
  // or not used because it already shards another dimension.
  std::vector<std::string> notes;
  // Axes a strategy asked for that the spec does not use.
  std::vector<std::string> dropped_axes;
};

// Where one named parameter goes: its logical axes, its spec and its pipeline stage.
struct ParameterPlacement {
  LogicalAxes logical_axes;
  PartitionSpec spec;
  std::int64_t stage = 0;
};

class MultiDimensionalStrategy {
 public:
  using NamedStrategy = std::pair<std::string, std::shared_ptr<const ShardingStrategy>>;

  // Throws InvalidArgument when the config is invalid, a strategy's axis is not in it, two
  // strategies of one kind share an axis, or strategies other than data-parallel and FSDP
  // share one.
  MultiDimensionalStrategy(std::vector<NamedStrategy> strategies, ParallelismConfig config);

  [[nodiscard]] const std::vector<NamedStrategy>& strategies() const { return strategies_; }
  [[nodiscard]] const ParallelismConfig& config() const { return config_; }
  [[nodiscard]] Mesh mesh() const { return config_.to_mesh(); }

  // Every strategy's spec for these names, merged. Priority when two want one dimension:
  // tensor > FSDP > data > pipeline (the reference keeps 'model' over 'fsdp' over the rest).
  // Without a shape, conflicting axes are combined on the dimension (higher priority major);
  // with one, combining and moving respect divisibility, and strategies see the shape (FSDP
  // skips weights below its minimum size).
  [[nodiscard]] SpecResolution get_combined_partition_spec(
      const std::string& tensor_name, const LogicalAxes& dim_names,
      const std::optional<Shape>& shape = std::nullopt) const;

  // The same merge over specs already proposed, keyed by strategy name.
  [[nodiscard]] SpecResolution resolve_sharding_conflicts(
      const std::string& tensor_name, const std::map<std::string, PartitionSpec>& proposed,
      const std::optional<Shape>& shape = std::nullopt) const;

  // The reference's create_partition_spec done properly: the parameter-name rules give the
  // parameter's logical axes and stage (stages from assign_layers_to_stages over num_layers,
  // not a hard-coded 24), and default_logical_axis_rules(config) - which agree with these
  // strategies on their names - give its spec. Axes that do not divide the shape are left out.
  // Throws InvalidArgument when no rule names the parameter or its stage cannot be told.
  [[nodiscard]] ParameterPlacement create_partition_spec(const Shape& param_shape,
                                                         const std::string& param_name,
                                                         const ParameterNameRules& rules,
                                                         std::int64_t num_layers) const;

 private:
  [[nodiscard]] const ShardingStrategy& strategy_named(const std::string& name) const;

  std::vector<NamedStrategy> strategies_;
  ParallelismConfig config_;
};

// The strategies a ParallelismConfig implies, named by kind: "data" (DataParallelStrategy on
// 'data', when the mesh has it), "fsdp" (FSDPStrategy on the config's FSDP axis with its
// minimum weight size, when enabled), "tensor" (TensorParallelStrategy on 'model' splitting
// out_features, when tensor_parallel_size > 1), "pipeline" (when pipeline_parallel_size > 1).
MultiDimensionalStrategy default_strategies(const ParallelismConfig& config);

}  // namespace shardwise

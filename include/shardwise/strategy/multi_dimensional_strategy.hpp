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

// Where one named parameter goes: its logical axes, its spec and its pipeline stage, and what
// could not be done as the rules asked, in words.
struct ParameterPlacement {
  LogicalAxes logical_axes;
  PartitionSpec spec;
  std::int64_t stage = 0;
  std::vector<std::string> notes;
  std::vector<std::string> dropped_axes;
};

struct PlacementOptions {
  // Elements per indivisible unit of logical axes ("heads" -> head_dim).
  AxisUnits units;
  // A parameter no rule names, a stage no rule gives, or an axis moved or dropped is an error
  // instead of a note.
  bool strict = false;
};

class MultiDimensionalStrategy {
 public:
  using NamedStrategy = std::pair<std::string, std::shared_ptr<const ShardingStrategy>>;

  // Throws InvalidArgument when the config is invalid, a strategy's axis is not in it or is
  // at another index than the strategy's mesh_axis, a pipeline strategy's stage count differs
  // from its axis's size, two strategies of one kind share an axis, or strategies other than
  // data-parallel and FSDP share one.
  MultiDimensionalStrategy(std::vector<NamedStrategy> strategies, ParallelismConfig config);

  [[nodiscard]] const std::vector<NamedStrategy>& strategies() const { return strategies_; }
  [[nodiscard]] const ParallelismConfig& config() const { return config_; }
  [[nodiscard]] Mesh mesh() const { return config_.to_mesh(); }

  // The strategies as one list of logical-axis rules (rules_from_claims over every strategy's
  // claims, strategies taken data-like first): every spec below comes from these rules.
  // Priority when two strategies claim one name: tensor > FSDP > data > pipeline (the
  // reference keeps 'model' over 'fsdp' over the rest); both axes are combined on it, the
  // higher priority major.
  [[nodiscard]] const LogicalAxisRules& logical_axis_rules() const { return rules_; }

  // Every strategy's spec for these names, merged: logical_axis_rules().resolve(). Without a
  // shape, claims that meet on a dimension are combined there; with one, the largest part
  // that divides stays and the rest moves to a free dimension it divides or is dropped, with
  // a note. A dimension no strategy claims against another stays as the strategy alone has
  // it, so a combination behaves like its parts where they do not conflict.
  [[nodiscard]] SpecResolution get_combined_partition_spec(
      const std::string& tensor_name, const LogicalAxes& dim_names,
      const std::optional<Shape>& shape = std::nullopt, const AxisUnits& units = {}) const;

  // The same merge over specs already proposed, keyed by strategy name: each proposal's
  // entry on a dimension is that strategy's claim on it.
  [[nodiscard]] SpecResolution resolve_sharding_conflicts(
      const std::string& tensor_name, const std::map<std::string, PartitionSpec>& proposed,
      const std::optional<Shape>& shape = std::nullopt) const;

  // The reference's create_partition_spec done properly: the parameter-name rules give the
  // parameter's logical axes and stage (stages from assign_layers_to_stages over num_layers,
  // not a hard-coded 24), and logical_axis_rules() its spec. A parameter no rule names is
  // replicated, and one without a layer index that no stage rule places is on the first
  // stage, each with a note (errors in strict mode).
  [[nodiscard]] ParameterPlacement create_partition_spec(
      const Shape& param_shape, const std::string& param_name, const ParameterNameRules& rules,
      std::int64_t num_layers, const PlacementOptions& options = {}) const;

 private:
  [[nodiscard]] const ShardingStrategy& strategy_named(const std::string& name) const;

  std::vector<NamedStrategy> strategies_;
  ParallelismConfig config_;
  LogicalAxisRules rules_;
};

// The strategies a ParallelismConfig implies, named by kind: "data" (DataParallelStrategy on
// 'data', when the mesh has it), "fsdp" (FSDPStrategy on the config's FSDP axis with its
// minimum weight size, when enabled), "expert" (ExpertParallelStrategy on 'expert', when
// expert_parallel_size > 1), "tensor" (TensorParallelStrategy on 'model' splitting
// out_features, when tensor_parallel_size > 1), "pipeline" (when pipeline_parallel_size > 1).
MultiDimensionalStrategy default_strategies(const ParallelismConfig& config);

}  // namespace shardwise

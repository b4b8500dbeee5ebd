#include "shardwise/strategy/multi_dimensional_strategy.hpp"

#include <algorithm>

#include "detail/spec_resolver.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/expert_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"

namespace shardwise {
namespace {

bool may_share_axis(StrategyKind a, StrategyKind b) {
  const auto is_data = [](StrategyKind k) {
    return k == StrategyKind::kDataParallel || k == StrategyKind::kFsdp;
  };
  return a != b && is_data(a) && is_data(b);
}

// The strategies with data-like ones first (their claims, the batch's among them, come first
// in the rules), in the given order among equals.
std::vector<const MultiDimensionalStrategy::NamedStrategy*> claim_order(
    const std::vector<MultiDimensionalStrategy::NamedStrategy>& strategies) {
  std::vector<const MultiDimensionalStrategy::NamedStrategy*> order;
  for (const auto& named : strategies) order.push_back(&named);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return static_cast<int>(claim_priority(a->second->kind())) <
           static_cast<int>(claim_priority(b->second->kind()));
  });
  return order;
}

void check_against_mesh(const std::string& name, const ShardingStrategy& strategy,
                        const Mesh& mesh) {
  if (!mesh.has_axis(strategy.axis_name())) {
    throw InvalidArgument("strategy '" + name + "' uses axis '" + strategy.axis_name() +
                          "', which is not in " + mesh.to_string());
  }
  const auto index = static_cast<int>(mesh.axis_index(strategy.axis_name()));
  if (strategy.mesh_axis() && *strategy.mesh_axis() != index) {
    throw InvalidArgument("strategy '" + name + "' was built for axis '" + strategy.axis_name() +
                          "' at mesh axis " + std::to_string(*strategy.mesh_axis()) + ", but " +
                          mesh.to_string() + " has it at mesh axis " + std::to_string(index));
  }
  const auto* pipeline = dynamic_cast<const PipelineParallelStrategy*>(&strategy);
  if (pipeline != nullptr && pipeline->num_stages() != mesh.axis_size(strategy.axis_name())) {
    throw InvalidArgument("strategy '" + name + "' has " + std::to_string(pipeline->num_stages()) +
                          " pipeline stages, but axis '" + strategy.axis_name() + "' of " +
                          mesh.to_string() + " has size " +
                          std::to_string(mesh.axis_size(strategy.axis_name())));
  }
}

}  // namespace

MultiDimensionalStrategy::MultiDimensionalStrategy(std::vector<NamedStrategy> strategies,
                                                   ParallelismConfig config)
    : strategies_(std::move(strategies)), config_(std::move(config)) {
  config_.validate();
  const Mesh mesh = config_.to_mesh();
  for (std::size_t i = 0; i < strategies_.size(); ++i) {
    const auto& [name, strategy] = strategies_[i];
    if (!strategy) throw InvalidArgument("strategy '" + name + "' is null");
    check_against_mesh(name, *strategy, mesh);
    for (std::size_t j = 0; j < i; ++j) {
      const auto& [other_name, other] = strategies_[j];
      if (other_name == name) throw InvalidArgument("two strategies are named '" + name + "'");
      if (other->axis_name() != strategy->axis_name()) continue;
      if (!may_share_axis(other->kind(), strategy->kind())) {
        throw InvalidArgument("strategies '" + other_name + "' (" + to_string(other->kind()) +
                              ") and '" + name + "' (" + to_string(strategy->kind()) +
                              ") share axis '" + strategy->axis_name() +
                              "'; only data-parallel and FSDP may share an axis");
      }
    }
  }
  std::vector<AxisClaim> claims;
  for (const auto* named : claim_order(strategies_)) {
    for (AxisClaim& claim : named->second->axis_claims()) claims.push_back(std::move(claim));
  }
  rules_ = rules_from_claims(claims);
}

const ShardingStrategy& MultiDimensionalStrategy::strategy_named(const std::string& name) const {
  for (const auto& [strategy_name, strategy] : strategies_) {
    if (strategy_name == name) return *strategy;
  }
  throw InvalidArgument("no strategy is named '" + name + "'");
}

SpecResolution MultiDimensionalStrategy::get_combined_partition_spec(
    const std::string& tensor_name, const LogicalAxes& dim_names, const std::optional<Shape>& shape,
    const AxisUnits& units) const {
  ResolveOptions options;
  options.shape = shape;
  options.units = units;
  return rules_.resolve(tensor_name, dim_names, mesh(), options);
}

SpecResolution MultiDimensionalStrategy::resolve_sharding_conflicts(
    const std::string& tensor_name, const std::map<std::string, PartitionSpec>& proposed,
    const std::optional<Shape>& shape) const {
  const Mesh mesh = config_.to_mesh();
  std::size_t rank = shape ? shape->size() : 0;
  for (const auto& [name, spec] : proposed) {
    (void)strategy_named(name);
    if (shape && spec.size() > shape->size()) {
      throw ShardingError(tensor_name + ": strategy '" + name + "' proposed " + spec.to_string() +
                          " for a tensor of rank " + std::to_string(shape->size()));
    }
    for (const std::string& axis : spec.all_axes()) {
      if (!mesh.has_axis(axis)) {
        throw ShardingError(tensor_name + ": strategy '" + name + "' proposed axis '" + axis +
                            "', which is not in " + mesh.to_string());
      }
    }
    rank = std::max(rank, spec.size());
  }
  // Each proposal's entry on dimension d is its strategy's claim on a name private to d.
  LogicalAxes dimension_names(rank);
  for (std::size_t d = 0; d < rank; ++d) dimension_names[d].append("#").append(std::to_string(d));
  std::vector<AxisClaim> claims;
  for (const auto* named : claim_order(strategies_)) {
    auto it = proposed.find(named->first);
    if (it == proposed.end()) continue;
    const auto own = named->second->axis_claims();
    const bool relocatable =
        std::any_of(own.begin(), own.end(), [](const AxisClaim& c) { return c.relocatable; });
    for (std::size_t d = 0; d < it->second.size(); ++d) {
      const SpecEntry& entry = it->second.entry(d);
      if (entry.is_replicated()) continue;
      claims.push_back({dimension_names[d], entry.axes(), claim_priority(named->second->kind()), 0,
                        relocatable});
    }
  }
  ResolveOptions options;
  options.shape = shape;
  return detail::resolve_rules(rules_from_claims(claims).rules(), tensor_name, dimension_names,
                               &mesh, options, false);
}

ParameterPlacement MultiDimensionalStrategy::create_partition_spec(
    const Shape& param_shape, const std::string& param_name, const ParameterNameRules& rules,
    std::int64_t num_layers, const PlacementOptions& options) const {
  if (num_layers < 0 || num_layers > kMaxModelLayers) {
    throw InvalidArgument("create_partition_spec num_layers is " + std::to_string(num_layers) +
                          "; expected 0 to " + std::to_string(kMaxModelLayers));
  }
  ParameterPlacement placement;
  if (auto axes = rules.logical_axes_for(param_name, param_shape.size())) {
    placement.logical_axes = std::move(*axes);
  } else {
    const std::string note = param_name + ": no parameter rule names it: replicated";
    if (options.strict) throw InvalidArgument(note + " (strict layout)");
    placement.logical_axes.assign(param_shape.size(), "");
    if (!param_shape.empty()) placement.notes.push_back(note);
  }
  ResolveOptions resolve_options;
  resolve_options.shape = param_shape;
  resolve_options.units = options.units;
  resolve_options.strict = options.strict;
  SpecResolution resolution =
      rules_.resolve(param_name, placement.logical_axes, mesh(), resolve_options);
  placement.spec = std::move(resolution.spec);
  placement.notes.insert(placement.notes.end(), resolution.notes.begin(), resolution.notes.end());
  placement.dropped_axes = std::move(resolution.dropped_axes);
  for (const auto& [name, strategy] : strategies_) {
    if (const auto* pipeline = dynamic_cast<const PipelineParallelStrategy*>(strategy.get())) {
      const StagePlacement stage =
          rules.place_in_stage(param_name, pipeline->assign_layers_to_stages(num_layers));
      if (stage.note && options.strict) throw InvalidArgument(*stage.note + " (strict layout)");
      if (stage.note) placement.notes.push_back(*stage.note);
      placement.stage = stage.stage;
    }
  }
  return placement;
}

MultiDimensionalStrategy default_strategies(const ParallelismConfig& config) {
  config.validate();
  const ShardingConfig& sc = config.sharding_config;
  std::vector<MultiDimensionalStrategy::NamedStrategy> strategies;
  const auto& names = config.mesh_axis_names;
  if (std::find(names.begin(), names.end(), kDataAxis) != names.end()) {
    strategies.emplace_back("data", std::make_shared<DataParallelStrategy>(std::string(kDataAxis)));
  }
  if (sc.fsdp_enabled) {
    strategies.emplace_back(
        "fsdp",
        std::make_shared<FSDPStrategy>(sc.fsdp_axis_name(), std::nullopt, sc.fsdp_min_weight_size));
  }
  if (sc.expert_parallel_size > 1) {
    strategies.emplace_back("expert",
                            std::make_shared<ExpertParallelStrategy>(std::string(kExpertAxis)));
  }
  if (sc.tensor_parallel_size > 1) {
    strategies.emplace_back("tensor", std::make_shared<TensorParallelStrategy>(
                                          std::string(kModelAxis), std::nullopt, "out_features"));
  }
  if (sc.pipeline_parallel_size > 1) {
    strategies.emplace_back("pipeline", std::make_shared<PipelineParallelStrategy>(
                                            sc.pipeline_parallel_size, std::string(kPipelineAxis)));
  }
  return MultiDimensionalStrategy(std::move(strategies), config);
}

}  // namespace shardwise

namespace shardwise {

LogicalAxisRules default_logical_axis_rules(const ParallelismConfig& config) {
  return default_strategies(config).logical_axis_rules();
}

}  // namespace shardwise

#include "shardwise/strategy/multi_dimensional_strategy.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"

namespace shardwise {
namespace {

int priority(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kTensorParallel: return 3;
    case StrategyKind::kFsdp: return 2;
    case StrategyKind::kDataParallel: return 1;
    case StrategyKind::kPipelineParallel: return 0;
  }
  return 0;
}

bool may_share_axis(StrategyKind a, StrategyKind b) {
  const auto is_data = [](StrategyKind k) {
    return k == StrategyKind::kDataParallel || k == StrategyKind::kFsdp;
  };
  return a != b && is_data(a) && is_data(b);
}

// Builds the merged spec one axis at a time.
class SpecMerger {
 public:
  SpecMerger(const Mesh& mesh, std::string tensor_name, const std::optional<Shape>& shape,
             std::size_t rank)
      : mesh_(mesh), tensor_name_(std::move(tensor_name)), shape_(shape), entries_(rank) {}

  void add(const std::string& strategy, const std::string& axis, std::size_t dim) {
    const std::string who = tensor_name_ + ": " + strategy + " axis '" + axis + "'";
    if (const int used = used_by(axis); used >= 0) {
      if (static_cast<std::size_t>(used) != dim) {
        notes_.push_back(who + " wanted dimension " + std::to_string(dim) +
                         " but already splits dimension " + std::to_string(used));
      }
      return;
    }
    if (entries_[dim].empty()) {
      if (divides(dim, axis)) {
        entries_[dim].push_back(axis);
        return;
      }
    } else if (divides(dim, axis)) {
      notes_.push_back(who + " combined with " + describe(dim) + " on dimension " +
                       std::to_string(dim));
      entries_[dim].push_back(axis);
      return;
    }
    for (std::size_t other = 0; other < entries_.size(); ++other) {
      if (other != dim && entries_[other].empty() && divides(other, axis)) {
        entries_[other].push_back(axis);
        notes_.push_back(who + " moved from dimension " + std::to_string(dim) + " to dimension " +
                         std::to_string(other) + ", which it divides");
        return;
      }
    }
    dropped_.push_back(axis);
    notes_.push_back(who + " dropped: dimension " + std::to_string(dim) + " of shape " +
                     to_string(*shape_) + " cannot take it and no other dimension can");
  }

  SpecResolution finish() {
    std::vector<SpecEntry> entries;
    entries.reserve(entries_.size());
    for (auto& axes : entries_) entries.emplace_back(std::move(axes));
    return {PartitionSpec(std::move(entries)), std::move(notes_), std::move(dropped_)};
  }

 private:
  [[nodiscard]] int used_by(const std::string& axis) const {
    for (std::size_t d = 0; d < entries_.size(); ++d) {
      if (std::find(entries_[d].begin(), entries_[d].end(), axis) != entries_[d].end()) {
        return static_cast<int>(d);
      }
    }
    return -1;
  }

  // Without a shape everything divides; with one, the dimension must split evenly (and not
  // into empty shards) over the axes it has plus this one.
  [[nodiscard]] bool divides(std::size_t dim, const std::string& axis) const {
    if (!shape_) return true;
    std::int64_t shards = mesh_.axis_size(axis);
    for (const std::string& existing : entries_[dim]) shards *= mesh_.axis_size(existing);
    const std::int64_t size = (*shape_)[dim];
    return size % shards == 0 && (size > 0 || shards == 1);
  }

  [[nodiscard]] std::string describe(std::size_t dim) const {
    std::string text;
    for (const std::string& axis : entries_[dim]) text += (text.empty() ? "'" : ", '") + axis + "'";
    return text;
  }

  const Mesh& mesh_;
  std::string tensor_name_;
  const std::optional<Shape>& shape_;
  std::vector<std::vector<std::string>> entries_;
  std::vector<std::string> notes_;
  std::vector<std::string> dropped_;
};

}  // namespace

MultiDimensionalStrategy::MultiDimensionalStrategy(std::vector<NamedStrategy> strategies,
                                                   ParallelismConfig config)
    : strategies_(std::move(strategies)), config_(std::move(config)) {
  config_.validate();
  const Mesh mesh = config_.to_mesh();
  for (std::size_t i = 0; i < strategies_.size(); ++i) {
    const auto& [name, strategy] = strategies_[i];
    if (!strategy) throw InvalidArgument("strategy '" + name + "' is null");
    if (!mesh.has_axis(strategy->axis_name())) {
      throw InvalidArgument("strategy '" + name + "' uses axis '" + strategy->axis_name() +
                            "', which is not in " + mesh.to_string());
    }
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
}

const ShardingStrategy& MultiDimensionalStrategy::strategy_named(const std::string& name) const {
  for (const auto& [strategy_name, strategy] : strategies_) {
    if (strategy_name == name) return *strategy;
  }
  throw InvalidArgument("no strategy is named '" + name + "'");
}

SpecResolution MultiDimensionalStrategy::get_combined_partition_spec(
    const std::string& tensor_name, const LogicalAxes& dim_names,
    const std::optional<Shape>& shape) const {
  if (shape && shape->size() != dim_names.size()) {
    throw InvalidArgument(tensor_name + ": " + std::to_string(dim_names.size()) +
                          " dimension names for shape " + to_string(*shape));
  }
  std::map<std::string, PartitionSpec> proposed;
  for (const auto& [name, strategy] : strategies_) {
    proposed[name] =
        shape ? strategy->propose(dim_names, *shape) : strategy->get_partition_spec(dim_names);
  }
  return resolve_sharding_conflicts(tensor_name, proposed, shape);
}

SpecResolution MultiDimensionalStrategy::resolve_sharding_conflicts(
    const std::string& tensor_name, const std::map<std::string, PartitionSpec>& proposed,
    const std::optional<Shape>& shape) const {
  std::vector<std::pair<const std::string*, const PartitionSpec*>> order;
  std::size_t rank = shape ? shape->size() : 0;
  for (const auto& [name, spec] : proposed) {
    (void)strategy_named(name);
    order.emplace_back(&name, &spec);
    if (shape && spec.size() > shape->size()) {
      throw ShardingError(tensor_name + ": strategy '" + name + "' proposed " + spec.to_string() +
                          " for a tensor of rank " + std::to_string(shape->size()));
    }
    rank = std::max(rank, spec.size());
  }
  // Highest priority first; among equals, the order the strategies were given in.
  auto position = [&](const std::string& name) {
    for (std::size_t i = 0; i < strategies_.size(); ++i) {
      if (strategies_[i].first == name) return i;
    }
    return strategies_.size();
  };
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const int pa = priority(strategy_named(*a.first).kind());
    const int pb = priority(strategy_named(*b.first).kind());
    return pa != pb ? pa > pb : position(*a.first) < position(*b.first);
  });

  const Mesh mesh = config_.to_mesh();
  SpecMerger merger(mesh, tensor_name, shape, rank);
  for (const auto& [name, spec] : order) {
    for (std::size_t d = 0; d < spec->size(); ++d) {
      for (const std::string& axis : spec->entry(d).axes()) {
        if (!mesh.has_axis(axis)) {
          throw ShardingError(tensor_name + ": strategy '" + *name + "' proposed axis '" + axis +
                              "', which is not in " + mesh.to_string());
        }
        merger.add(*name, axis, d);
      }
    }
  }
  return merger.finish();
}

ParameterPlacement MultiDimensionalStrategy::create_partition_spec(const Shape& param_shape,
                                                                   const std::string& param_name,
                                                                   const ParameterNameRules& rules,
                                                                   std::int64_t num_layers) const {
  auto axes = rules.logical_axes_for(param_name, param_shape.size());
  if (!axes) {
    throw InvalidArgument("no parameter rule names '" + param_name + "'");
  }
  const Mesh mesh = config_.to_mesh();
  const PartitionSpec wanted =
      default_logical_axis_rules(config_).logical_to_mesh_axes(*axes, mesh);
  std::vector<SpecEntry> entries;
  for (std::size_t d = 0; d < param_shape.size(); ++d) {
    std::int64_t shards = 1;
    for (const std::string& axis : wanted.entry(d).axes()) shards *= mesh.axis_size(axis);
    entries.push_back(param_shape[d] % shards == 0 ? wanted.entry(d) : None);
  }
  std::int64_t stage = 0;
  for (const auto& [name, strategy] : strategies_) {
    if (const auto* pipeline = dynamic_cast<const PipelineParallelStrategy*>(strategy.get())) {
      stage = rules.stage_of(param_name, pipeline->assign_layers_to_stages(num_layers));
    }
  }
  return {std::move(*axes), PartitionSpec(std::move(entries)), stage};
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

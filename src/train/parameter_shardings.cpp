#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/core/element_type.hpp"

#include <set>

#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/strategy/model_layout.hpp"
#include "shardwise/strategy/model_manifest.hpp"

namespace shardwise::train {
namespace {

Mesh group_mesh(const std::string& axis, std::int64_t size) {
  if (size < 1) {
    throw InvalidArgument("a shard group of " + std::to_string(size) + " ranks along '" + axis +
                          "'");
  }
  return Mesh({axis}, {size});
}

std::string describe(const ParameterSpec& parameter, const PartitionSpec& spec) {
  return "parameter '" + parameter.name + "' of shape " + to_string(parameter.shape) + " with " +
         spec.to_string();
}

}  // namespace

void ParameterShardings::validate(const std::vector<ParameterSpec>& parameters) const {
  if (specs.size() != parameters.size() || reasons.size() != parameters.size()) {
    throw InvalidArgument("shardings give " + std::to_string(specs.size()) + " specs and " +
                          std::to_string(reasons.size()) + " reasons for " +
                          std::to_string(parameters.size()) + " parameters");
  }
  const Mesh mesh = group_mesh(axis, size);
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    for (const std::string& used : specs[p].all_axes()) {
      if (used != axis) {
        throw InvalidArgument(describe(parameters[p], specs[p]) + " is split over '" + used +
                              "'; ZeRO splits parameters over '" + axis + "' only");
      }
    }
    try {
      NamedSharding(mesh, specs[p], evenness).validate(parameters[p].shape);
    } catch (const Error& error) {
      throw InvalidArgument(describe(parameters[p], specs[p]) + " does not fit " +
                            mesh.to_string() + ": " + error.what());
    }
  }
}

std::int64_t ParameterShardings::shard_elements(
    const std::vector<ParameterSpec>& parameters) const {
  const Mesh mesh = group_mesh(axis, size);
  std::int64_t total = 0;
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const Shape shard = NamedSharding(mesh, specs[p], evenness).shard_shape(parameters[p].shape);
    total = checked_add(total, num_elements(shard), "shard elements");
  }
  return total;
}

ParameterShardings fsdp_shardings(const std::vector<ParameterSpec>& parameters,
                                  const FSDPStrategy& strategy, std::int64_t size,
                                  FsdpSplit split) {
  ParameterShardings out;
  out.axis = strategy.axis_name();
  out.size = size;
  const Mesh mesh = group_mesh(out.axis, size);
  for (const ParameterSpec& parameter : parameters) {
    if (split == FsdpSplit::kLogicalAxes && !parameter.logical_axes.empty()) {
      ResolveOptions options;
      options.shape = parameter.shape;
      SpecResolution resolution =
          strategy.resolve(parameter.name, parameter.logical_axes, mesh, options);
      std::string reason = resolution.spec.all_axes().empty()
                               ? "no logical axis FSDP splits: replicated"
                               : "logical axes split by FSDP";
      for (const std::string& note : resolution.notes) reason += "; " + note;
      out.specs.push_back(std::move(resolution.spec));
      out.reasons.push_back(std::move(reason));
      continue;
    }
    FsdpDecision decision = strategy.decide(parameter.shape, size);
    if (decision.evenness == Evenness::kUneven) out.evenness = Evenness::kUneven;
    out.specs.push_back(std::move(decision.spec));
    out.reasons.push_back(std::move(decision.reason));
  }
  out.validate(parameters);
  return out;
}

ParameterShardings default_shardings(const std::vector<ParameterSpec>& parameters,
                                     const std::string& axis, std::int64_t size) {
  return fsdp_shardings(parameters, FSDPStrategy::splitting_every_parameter(axis), size,
                        FsdpSplit::kFirstDimension);
}

ModelManifest manifest_of(const std::vector<ParameterSpec>& parameters) {
  ModelManifest manifest;
  for (const ParameterSpec& parameter : parameters) {
    ParameterInfo info{parameter.name, parameter.shape, ParameterStore::kElementType, std::nullopt};
    if (!parameter.logical_axes.empty()) info.logical_axes = parameter.logical_axes;
    manifest.parameters.push_back(std::move(info));
  }
  return manifest;
}

ParameterShardings rules_shardings(const std::vector<ParameterSpec>& parameters, const Mesh& mesh,
                                   const std::string& axis, const LogicalAxisRules& axis_rules,
                                   const ParameterNameRules& name_rules) {
  if (!mesh.has_axis(axis)) {
    throw InvalidArgument("the mesh " + mesh.to_string() + " has no axis '" + axis + "'");
  }
  const ModelLayout layout = layout_model(manifest_of(parameters), mesh, axis_rules, name_rules);
  ParameterShardings out;
  out.axis = axis;
  out.size = mesh.axis_size(axis);
  out.notes = layout.notes;
  for (const ParameterLayout& placed : layout.parameters) {
    std::string axes;
    for (const std::string& name : placed.logical_axes) {
      axes += (axes.empty() ? "" : ", ") + (name.empty() ? std::string("None") : name);
    }
    // The model and expert axes split the parameters already (these are their blocks): ZeRO
    // keeps the rest.
    std::vector<SpecEntry> entries;
    for (const SpecEntry& entry : placed.spec.entries()) {
      std::vector<std::string> kept;
      for (const std::string& name : entry.axes()) {
        if (name != kModelAxis && name != kExpertAxis) kept.push_back(name);
      }
      entries.emplace_back(std::move(kept));
    }
    while (!entries.empty() && entries.back().is_replicated()) entries.pop_back();
    out.specs.emplace_back(std::move(entries));
    out.reasons.push_back("the rules for logical axes (" + axes + ")");
  }
  out.validate(parameters);
  return out;
}

}  // namespace shardwise::train

#include "shardwise/strategy/model_layout.hpp"

#include <algorithm>
#include <optional>

#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"

namespace shardwise {
namespace {

std::vector<std::int64_t> stage_layers(const ModelManifest& manifest,
                                       const ParameterNameRules& rules, std::int64_t stages) {
  std::int64_t layers = 0;
  for (const ParameterInfo& p : manifest.parameters) {
    if (const auto layer = rules.layer_index(p.name)) layers = std::max(layers, *layer + 1);
  }
  if (stages == 1) return {layers};
  return PipelineParallelStrategy(stages).assign_layers_to_stages(layers);
}

}  // namespace

std::int64_t ModelLayout::max_bytes_per_device() const {
  return bytes_per_device.empty()
             ? 0
             : *std::max_element(bytes_per_device.begin(), bytes_per_device.end());
}

std::vector<std::int64_t> ModelLayout::max_bytes_by_stage() const {
  std::vector<std::int64_t> out(layers_per_stage.size(), 0);
  const bool pipelined = !pipeline_axis.empty();
  const std::size_t axis = pipelined ? mesh.axis_index(pipeline_axis) : 0;
  for (std::int64_t p = 0; p < mesh.size(); ++p) {
    const auto stage = pipelined ? static_cast<std::size_t>(mesh.coords_at(p)[axis]) : 0;
    out[stage] = std::max(out[stage], bytes_per_device[static_cast<std::size_t>(p)]);
  }
  return out;
}

namespace {

// A note for a mesh axis of more than one device whose rules name dimensions the parameters have
// but that splits none of them, saying why: every such dimension is below its rule's min_size
// (FSDP's min_weight_size), or the axis divides none. An axis no rule maps a parameter's
// dimension onto (data parallelism's 'data', which splits the batch) replicates by design.
std::optional<std::string> why_axis_splits_nothing(const ModelLayout& layout,
                                                   const LogicalAxisRules& rules,
                                                   const std::string& axis) {
  const std::string head = "mesh axis '" + axis + "' (" +
                           std::to_string(layout.mesh.axis_size(axis)) +
                           " devices) splits no parameter: every device along it holds the same "
                           "bytes; ";
  std::vector<const LogicalAxisRule*> onto;
  for (const LogicalAxisRule& rule : rules.rules()) {
    if (std::find(rule.mesh_axes.begin(), rule.mesh_axes.end(), axis) != rule.mesh_axes.end()) {
      onto.push_back(&rule);
    }
  }

  std::string names;
  std::int64_t largest_below = -1;  // the largest named dimension a min_size left whole
  std::int64_t min_size = 0;
  bool named = false;
  bool large_enough = false;  // a named dimension at least its rule's min_size
  for (const LogicalAxisRule* rule : onto) {
    names += (names.empty() ? "" : ", ") + rule->logical_name;
    for (const ParameterLayout& entry : layout.parameters) {
      for (std::size_t d = 0; d < entry.logical_axes.size(); ++d) {
        if (entry.logical_axes[d] != rule->logical_name) continue;
        named = true;
        if (entry.parameter.shape[d] < rule->min_size) {
          largest_below = std::max(largest_below, entry.parameter.shape[d]);
          min_size = std::max(min_size, rule->min_size);
        } else {
          large_enough = true;
        }
      }
    }
  }
  if (!named) return std::nullopt;
  if (!large_enough) {
    return head + "its rules split dimensions named " + names + " only where they have at least " +
           std::to_string(min_size) + " elements (the rule's min_size, FSDP's min_weight_size), " +
           "and the largest such dimension has " + std::to_string(largest_below) +
           " (a smaller min_size splits it)";
  }
  return head + "its rules split dimensions named " + names +
         ", which it does not divide (see the notes above)";
}

}  // namespace

ModelLayout layout_model(const ModelManifest& manifest, const Mesh& mesh,
                         const LogicalAxisRules& axis_rules, const ParameterNameRules& name_rules,
                         const LayoutOptions& options) {
  const bool pipelined = mesh.has_axis(options.pipeline_axis);
  const std::int64_t stages = pipelined ? mesh.axis_size(options.pipeline_axis) : 1;
  const std::size_t pipeline_index = pipelined ? mesh.axis_index(options.pipeline_axis) : 0;
  ModelLayout layout{mesh,
                     pipelined ? options.pipeline_axis : std::string(),
                     stage_layers(manifest, name_rules, stages),
                     {},
                     std::vector<std::int64_t>(static_cast<std::size_t>(mesh.size()), 0),
                     {},
                     {}};
  ResolveOptions resolve_options;
  resolve_options.units = manifest.axis_units;
  resolve_options.evenness = options.evenness;
  resolve_options.strict = options.strict;
  for (const ParameterInfo& p : manifest.parameters) {
    ParameterLayout entry{p, {}, P(), {}, 0};
    if (p.logical_axes) {
      entry.logical_axes = *p.logical_axes;
    } else if (auto axes = name_rules.logical_axes_for(p.name, p.shape.size())) {
      entry.logical_axes = std::move(*axes);
    } else {
      entry.logical_axes.assign(p.shape.size(), "");
      const std::string note = p.name + ": no parameter rule names it: replicated";
      if (options.strict && !p.shape.empty()) throw InvalidArgument(note + " (strict layout)");
      if (!p.shape.empty()) layout.notes.push_back(note);
    }
    resolve_options.shape = p.shape;
    SpecResolution resolution =
        axis_rules.resolve(p.name, entry.logical_axes, mesh, resolve_options);
    const PartitionSpec& spec = resolution.spec;
    if (pipelined && spec.dimension_of(options.pipeline_axis) >= 0) {
      throw InvalidArgument("parameter '" + p.name + "' would be split by " + spec.to_string() +
                            " over the pipeline axis '" + options.pipeline_axis +
                            "', which places layers, not tensor slices");
    }
    layout.notes.insert(layout.notes.end(), resolution.notes.begin(), resolution.notes.end());
    const NamedSharding sharding(mesh, spec, options.evenness);
    entry.spec = spec;
    entry.shard_shape = sharding.shard_shape(p.shape);
    if (stages > 1) {
      const StagePlacement stage = name_rules.place_in_stage(p.name, layout.layers_per_stage);
      if (stage.note && options.strict) throw InvalidArgument(*stage.note + " (strict layout)");
      if (stage.note) layout.notes.push_back(*stage.note);
      entry.stage = stage.stage;
    }
    const auto element_bytes = static_cast<std::int64_t>(size_in_bytes(p.dtype));
    for (const DeviceShard& shard : sharding.devices_indices_map(p.shape)) {
      const std::int64_t position = mesh.position_of_device(shard.device);
      if (pipelined && mesh.coords_at(position)[pipeline_index] != entry.stage) continue;
      std::int64_t& held = layout.bytes_per_device[static_cast<std::size_t>(position)];
      held = checked_add(held,
                         checked_multiply(num_elements(shape_of(shard.index)), element_bytes,
                                          "bytes of " + p.name),
                         "parameter bytes of a device");
    }
    layout.parameters.push_back(std::move(entry));
  }
  for (std::size_t a = 0; a < mesh.num_axes(); ++a) {
    const std::string& axis = mesh.axis_names()[a];
    if (mesh.axis_sizes()[a] == 1 || (pipelined && axis == options.pipeline_axis)) continue;
    if (std::any_of(layout.parameters.begin(), layout.parameters.end(),
                    [&](const ParameterLayout& e) { return e.spec.dimension_of(axis) >= 0; })) {
      continue;
    }
    if (auto note = why_axis_splits_nothing(layout, axis_rules, axis)) {
      layout.axis_notes.push_back(std::move(*note));
    }
  }
  return layout;
}

}  // namespace shardwise

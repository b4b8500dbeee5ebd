#include "shardwise/strategy/model_layout.hpp"

#include <algorithm>

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
  return layout;
}

}  // namespace shardwise

#include "specs_render.hpp"

#include <nlohmann/json.hpp>
#include <sstream>

#include "text_table.hpp"

namespace shardwise::cli {
namespace {

std::string axes_text(const LogicalAxes& axes) {
  std::string text;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    text += (i ? ", " : "") + (axes[i].empty() ? std::string("-") : axes[i]);
  }
  return text.empty() ? "-" : text;
}

nlohmann::ordered_json axes_json(const LogicalAxes& axes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const std::string& axis : axes) {
    out.push_back(axis.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(axis));
  }
  return out;
}

std::string stage_ranges(const std::vector<std::int64_t>& layers_per_stage) {
  std::string text;
  std::int64_t first = 0;
  for (std::size_t s = 0; s < layers_per_stage.size(); ++s) {
    const std::int64_t count = layers_per_stage[s];
    text += (s ? ", " : "") + std::to_string(s) + ": ";
    text += count == 0 ? std::string("no layers")
            : count == 1
                ? "layer " + std::to_string(first)
                : "layers " + std::to_string(first) + "-" + std::to_string(first + count - 1);
    first += count;
  }
  return text;
}

}  // namespace

std::string render_specs_text(const ModelLayout& layout) {
  std::int64_t elements = 0;
  std::int64_t bytes = 0;
  for (const ParameterLayout& p : layout.parameters) {
    elements += num_elements(p.parameter.shape);
    bytes += num_elements(p.parameter.shape) *
             static_cast<std::int64_t>(size_in_bytes(p.parameter.dtype));
  }
  std::ostringstream out;
  out << "mesh        " << layout.mesh.to_string() << '\n'
      << "parameters  " << layout.parameters.size() << " tensors, " << with_thousands(elements)
      << " elements, " << with_thousands(bytes) << " bytes\n"
      << "stages      " << stage_ranges(layout.layers_per_stage) << "\n\n";
  std::vector<std::vector<std::string>> table{
      {"name", "shape", "dtype", "logical axes", "spec", "shard shape", "stage"}};
  for (const ParameterLayout& p : layout.parameters) {
    table.push_back({p.parameter.name, to_string(p.parameter.shape), to_string(p.parameter.dtype),
                     axes_text(p.logical_axes), p.spec.to_string(), to_string(p.shard_shape),
                     std::to_string(p.stage)});
  }
  out << format_table(table);
  if (!layout.notes.empty() || !layout.axis_notes.empty()) {
    out << "\nnotes\n";
    for (const std::string& note : layout.notes) out << "  " << note << '\n';
    for (const std::string& note : layout.axis_notes) out << "  " << note << '\n';
  }
  out << "\nparameter bytes per device\n";
  const std::vector<std::int64_t> by_stage = layout.max_bytes_by_stage();
  for (std::size_t s = 0; s < by_stage.size(); ++s) {
    out << "  stage " << s << "  " << with_thousands(by_stage[s]) << '\n';
  }
  out << "  largest  " << with_thousands(layout.max_bytes_per_device()) << '\n';
  return out.str();
}

std::string render_specs_json(const ModelLayout& layout, const std::vector<Shape>& held_shapes) {
  using nlohmann::ordered_json;
  ordered_json parameters = ordered_json::array();
  for (std::size_t i = 0; i < layout.parameters.size(); ++i) {
    const ParameterLayout& p = layout.parameters[i];
    parameters.push_back({{"name", p.parameter.name},
                          {"shape", p.parameter.shape},
                          {"dtype", to_string(p.parameter.dtype)},
                          {"logical_axes", axes_json(p.logical_axes)},
                          {"spec", p.spec.to_string()},
                          {"shard_shape", p.shard_shape},
                          {"held_shape", i < held_shapes.size() ? held_shapes[i] : p.shard_shape},
                          {"stage", p.stage}});
  }
  ordered_json by_device = ordered_json::array();
  for (std::int64_t position = 0; position < layout.mesh.size(); ++position) {
    const auto index = static_cast<std::size_t>(position);
    by_device.push_back(
        {{"device", layout.mesh.device_ids()[index]}, {"bytes", layout.bytes_per_device[index]}});
  }
  const ordered_json result = {
      {"mesh",
       {{"axis_names", layout.mesh.axis_names()}, {"axis_sizes", layout.mesh.axis_sizes()}}},
      {"layers_per_stage", layout.layers_per_stage},
      {"parameters", std::move(parameters)},
      {"bytes_per_device",
       {{"max", layout.max_bytes_per_device()},
        {"by_stage", layout.max_bytes_by_stage()},
        {"by_device", std::move(by_device)}}},
      {"notes", layout.notes},
      {"axis_notes", layout.axis_notes},
  };
  return result.dump();
}

}  // namespace shardwise::cli

#include "shardwise/train/placement.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/strategy/model_layout.hpp"
#include "shardwise/train/parameter_shardings.hpp"

namespace shardwise::train {
namespace {

bool splits_for_good(const std::string& axis) { return axis == kModelAxis || axis == kExpertAxis; }

// The entries of `spec` naming the model or the expert axis, the others left out.
PartitionSpec model_part(const PartitionSpec& spec) {
  std::vector<SpecEntry> entries;
  for (const SpecEntry& entry : spec.entries()) {
    std::vector<std::string> kept;
    for (const std::string& axis : entry.axes()) {
      if (splits_for_good(axis)) kept.push_back(axis);
    }
    entries.emplace_back(std::move(kept));
  }
  while (!entries.empty() && entries.back().is_replicated()) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

// The block of rows `device` holds of a parameter its model ranks share in `blocks` blocks.
ParameterSpec shared_rows_of(const ParameterSpec& whole, const PartitionSpec& placement,
                             const Mesh& mesh, DeviceId device, std::size_t blocks) {
  const auto degree = static_cast<std::size_t>(mesh.axis_size(kModelAxis));
  const std::int64_t rows = whole.shape.empty() ? 0 : whole.shape[0];
  const auto b = static_cast<std::int64_t>(blocks);
  if (!placement.all_axes().empty() || whole.shape.empty() || degree % blocks != 0 ||
      rows % b != 0) {
    throw InvalidArgument("parameter '" + whole.name + "' of shape " + to_string(whole.shape) +
                          " placed by " + placement.to_string() +
                          " cannot have its rows shared in " + std::to_string(blocks) +
                          " blocks by " + std::to_string(degree) +
                          " model ranks (whole placement, blocks dividing its rows and the axis)");
  }
  const std::int64_t coordinate =
      mesh.coords_at(mesh.position_of_device(device))[mesh.axis_index(kModelAxis)];
  const std::int64_t mine = coordinate / static_cast<std::int64_t>(degree / blocks);
  ParameterSpec part = whole;
  part.global_shape = whole.shape;
  for (std::size_t d = 0; d < whole.shape.size(); ++d) part.block.push_back({0, whole.shape[d]});
  part.block[0] = {mine * (rows / b), (mine + 1) * (rows / b)};
  part.shape[0] = rows / b;
  part.gradient.model_sharers = degree / blocks;
  return part;
}

}  // namespace

int model_degree(const Mesh& mesh) {
  return mesh.has_axis(kModelAxis) ? static_cast<int>(mesh.axis_size(kModelAxis)) : 1;
}

int expert_degree(const Mesh& mesh) {
  return mesh.has_axis(kExpertAxis) ? static_cast<int>(mesh.axis_size(kExpertAxis)) : 1;
}

std::string shared_rows_words(std::size_t blocks, std::size_t sharers) {
  if (blocks == 1) return "whole on each of the " + std::to_string(sharers) + " 'model' ranks";
  return "rows in " + std::to_string(blocks) + " blocks over 'model', each on " +
         std::to_string(sharers) + " ranks";
}

std::vector<PartitionSpec> model_placements(const ModelManifest& manifest, const Mesh& mesh,
                                            const LogicalAxisRules& axis_rules,
                                            const ParameterNameRules& name_rules) {
  if (!mesh.has_axis(kModelAxis) && !mesh.has_axis(kExpertAxis)) {
    return std::vector<PartitionSpec>(manifest.parameters.size());
  }
  const ModelLayout layout = layout_model(manifest, mesh, axis_rules, name_rules);
  std::vector<PartitionSpec> placements;
  for (const ParameterLayout& placed : layout.parameters) {
    placements.push_back(model_part(placed.spec));
  }
  return placements;
}

std::vector<ParameterSpec> local_parameters(const std::vector<ParameterSpec>& parameters,
                                            const Mesh& mesh, DeviceId device,
                                            const std::vector<PartitionSpec>& placements,
                                            const std::vector<SharedRows>& shared) {
  if (placements.size() != parameters.size()) {
    throw InvalidArgument(std::to_string(placements.size()) + " placements for " +
                          std::to_string(parameters.size()) + " parameters");
  }
  std::vector<std::size_t> blocks(parameters.size(), 0);
  for (const SharedRows& rows : shared) {
    if (rows.parameter >= parameters.size() || rows.blocks == 0) {
      throw InvalidArgument("shared rows of parameter " + std::to_string(rows.parameter) + " in " +
                            std::to_string(rows.blocks) + " blocks, of " +
                            std::to_string(parameters.size()) + " parameters");
    }
    blocks[rows.parameter] = rows.blocks;
  }
  std::vector<ParameterSpec> local;
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const ParameterSpec& whole = parameters[p];
    const PartitionSpec& placement = placements[p];
    bool over_experts = false;
    for (const std::string& axis : placement.all_axes()) {
      if (!splits_for_good(axis)) {
        throw InvalidArgument("parameter '" + whole.name + "' is placed by " +
                              placement.to_string() + "; only '" + std::string(kModelAxis) +
                              "' and '" + std::string(kExpertAxis) +
                              "' split a parameter for good");
      }
      over_experts = over_experts || (axis == kExpertAxis && mesh.axis_size(kExpertAxis) > 1);
    }
    if (blocks[p] != 0 && mesh.has_axis(kModelAxis)) {
      local.push_back(shared_rows_of(whole, placement, mesh, device, blocks[p]));
      continue;
    }
    if (placement.all_axes().empty()) {
      local.push_back(whole);
      continue;
    }
    ShardIndex block;
    try {
      block = NamedSharding(mesh, placement).device_index(whole.shape, device);
    } catch (const Error& e) {
      throw InvalidArgument("parameter '" + whole.name + "' of shape " + to_string(whole.shape) +
                            " cannot be placed by " + placement.to_string() + " on " +
                            mesh.to_string() + ": " + e.what());
    }
    ParameterSpec part = whole;
    part.global_shape = whole.shape;
    part.block = block;
    for (std::size_t d = 0; d < block.size(); ++d) part.shape[d] = block[d].size();
    // Each expert rank holds experts of its own: their gradients already sum every expert rank's
    // tokens, and are averaged over the data axes only.
    if (over_experts) std::erase(part.gradient.averaged_over, AxisRole::kExperts);
    local.push_back(std::move(part));
  }
  return local;
}

PartitionSpec whole_mesh_placement(const PartitionSpec& model, const PartitionSpec& zero,
                                   std::size_t rank) {
  std::vector<SpecEntry> entries;
  for (std::size_t d = 0; d < rank; ++d) {
    std::vector<std::string> axes;
    for (const PartitionSpec* part : {&model, &zero}) {
      if (d >= part->size()) continue;
      for (const std::string& axis : part->entry(d).axes()) axes.push_back(axis);
    }
    entries.emplace_back(std::move(axes));
  }
  while (!entries.empty() && entries.back().is_replicated()) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

}  // namespace shardwise::train

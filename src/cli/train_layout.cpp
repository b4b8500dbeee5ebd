#include "train_layout.hpp"

#include <sys/stat.h>

#include <set>

#include "shardwise/core/error.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/train/placement.hpp"
#include "text_table.hpp"

namespace shardwise::cli {

std::optional<ShardingRules> read_param_sharding_rules(const std::string& source,
                                                       const Mesh& mesh) {
  if (source == "first-dim" || source == "logical-axes") return std::nullopt;
  struct stat info {};
  if (::stat(source.c_str(), &info) != 0) {
    throw InvalidArgument("--param-sharding: '" + source +
                          "' is neither first-dim, logical-axes nor a readable rules file");
  }
  const std::string text = read_file(source, "--param-sharding");
  try {
    ShardingRules rules = load_sharding_rules(text, ParallelismConfig::from_mesh(mesh));
    // The GPT declares every parameter's logical axes, so name rules would decide nothing;
    // its stages come from --stages-by, so stage rules would place nothing.
    if (rules.gives_parameter_rules) {
      throw InvalidArgument(
          "parameter_rules give logical axes to parameters that declare none, and every "
          "parameter of the GPT declares its own (`shardwise specs --model tiny` shows them); "
          "map its logical axes with logical_axis_rules instead");
    }
    if (rules.gives_stage_rules) {
      throw InvalidArgument(
          "stage_rules place parameters in pipeline stages, and `shardwise train` assigns the "
          "GPT's layers to stages itself (--stages-by count or cost)");
    }
    return rules;
  } catch (const Error& e) {
    throw InvalidArgument("--param-sharding '" + source + "': " + e.what());
  }
}

train::ParameterShardings zero_shardings(const std::string& source,
                                         const std::vector<train::ParameterSpec>& blocks,
                                         const Mesh& mesh,
                                         const std::optional<ShardingRules>& rules) {
  const std::string shard_axis = train::ParallelContext::shard_axis_of(mesh);
  const std::string axis = shard_axis.empty() ? "fsdp" : shard_axis;
  const std::int64_t size = shard_axis.empty() ? 1 : mesh.axis_size(axis);
  if (!rules) {
    if (source == "first-dim") return train::default_shardings(blocks, axis, size);
    return train::fsdp_shardings(blocks, FSDPStrategy::splitting_every_parameter(axis), size,
                                 train::FsdpSplit::kLogicalAxes);
  }
  try {
    // ZeRO's layout is the rules' over the data-parallel axes, applied to the blocks.
    const Mesh zero_mesh = shard_axis.empty() ? Mesh({axis}, {1}) : mesh;
    return train::rules_shardings(blocks, zero_mesh, axis, rules->axis_rules, rules->name_rules);
  } catch (const Error& e) {
    throw InvalidArgument("--param-sharding '" + source + "': " + e.what());
  }
}

train::ParameterShardings shardings_held(const train::ParameterShardings& all,
                                         const std::vector<train::ParameterSpec>& all_specs,
                                         const std::vector<train::ParameterSpec>& held) {
  train::ParameterShardings mine = all;
  mine.specs.clear();
  mine.reasons.clear();
  for (const train::ParameterSpec& spec : held) {
    std::size_t p = 0;
    while (p < all_specs.size() && all_specs[p].name != spec.name) ++p;
    if (p == all_specs.size()) {
      throw InvalidArgument("parameter '" + spec.name + "' has no sharding among the model's");
    }
    mine.specs.push_back(all.specs[p]);
    mine.reasons.push_back(all.reasons[p]);
  }
  return mine;
}

std::vector<ParameterPlanRow> parameter_plan_rows(const std::vector<train::ParameterSpec>& specs,
                                                  const std::vector<PartitionSpec>& placements,
                                                  const train::ParameterShardings* shardings) {
  std::vector<ParameterPlanRow> rows;
  std::set<std::string> shown;
  for (std::size_t p = 0; p < specs.size(); ++p) {
    std::string name = specs[p].name;
    const std::size_t layer = name.find(".h.");
    if (layer != std::string::npos) {
      const std::size_t end = name.find('.', layer + 3);
      name = name.substr(0, layer) + ".h.*" + name.substr(end);
    }
    if (!shown.insert(name).second) continue;
    const PartitionSpec zero = shardings != nullptr ? shardings->specs[p] : PartitionSpec();
    Shape block = specs[p].shape;
    if (shardings != nullptr) {
      block = NamedSharding(Mesh({shardings->axis}, {shardings->size}), zero, Evenness::kUneven)
                  .shard_shape(specs[p].shape);
    }
    rows.push_back(
        {name, specs[p].whole_shape(), block,
         train::whole_mesh_placement(placements[p], zero, specs[p].shape.size()).to_string(),
         shardings != nullptr ? shardings->reasons[p] : std::string("ZeRO 0")});
  }
  return rows;
}

std::string parameter_plan(const std::vector<train::ParameterSpec>& specs,
                           const std::vector<PartitionSpec>& placements,
                           const train::ParameterShardings* shardings) {
  std::vector<std::vector<std::string>> table{{"parameter", "shape", "block", "placement", "why"}};
  for (const ParameterPlanRow& row : parameter_plan_rows(specs, placements, shardings)) {
    table.push_back(
        {"  " + row.name, to_string(row.shape), to_string(row.block), row.placement, row.why});
  }
  std::string notes;
  if (shardings != nullptr) {
    for (const std::string& note : shardings->notes) notes += "note: " + note + "\n";
  }
  return format_table(table) + notes;
}

std::string sharding_plan(int zero, const train::ParallelContext& context, std::size_t units) {
  if (context.shard_axis().empty()) {
    return "parameters, gradients and optimizer state replicated over the data-parallel ranks "
           "(the mesh has none)";
  }
  const std::string& axis = context.shard_axis();
  const std::string along =
      " along " + axis + (context.replica_axis().empty() ? "" : ", replicated along data (HSDP)");
  const std::string blocks = "each rank's blocks of the parameters (below), " +
                             std::to_string(context.degree(axis)) + " ranks" + along;
  switch (zero) {
    case 0: return "parameters, gradients and optimizer state replicated";
    case 1: return "parameters and gradients replicated, optimizer state sharded: " + blocks;
    case 2: return "parameters replicated, gradients and optimizer state sharded: " + blocks;
    default:
      return "parameters, gradients and optimizer state sharded: " + blocks + "; each of " +
             std::to_string(units) + " units is gathered for its use and freed after";
  }
}

}  // namespace shardwise::cli

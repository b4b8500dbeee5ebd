#pragma once
// How `shardwise train` lays its GPT out and says so: the rules --param-sharding names, ZeRO's
// split of each rank's blocks, and the plan printed at start.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/parameter_shardings.hpp"

namespace shardwise::cli {

// The rules file `source` (--param-sharding) names, read once; nullopt for first-dim and
// logical-axes. An InvalidArgument names the file and what the trainer cannot use of it.
std::optional<ShardingRules> read_param_sharding_rules(const std::string& source, const Mesh& mesh);

// How ZeRO splits each parameter's block (`blocks`: what a rank holds after the model axis), as
// `source` asks (the rules where a file gave them).
train::ParameterShardings zero_shardings(const std::string& source,
                                         const std::vector<train::ParameterSpec>& blocks,
                                         const Mesh& mesh,
                                         const std::optional<ShardingRules>& rules);

// The shardings of `held` (a pipeline stage's parameters, by name) among `all`, laid out for
// `all_specs` (the whole model's blocks).
train::ParameterShardings shardings_held(const train::ParameterShardings& all,
                                         const std::vector<train::ParameterSpec>& all_specs,
                                         const std::vector<train::ParameterSpec>& held);

// What the plan says of one parameter ("h.*" in its name standing for every layer): its shape,
// the block a rank holds, its placement over the whole mesh (the model axis' split, then ZeRO's
// of the block) and why ZeRO split it so.
struct ParameterPlanRow {
  std::string name;
  Shape shape;
  Shape block;
  std::string placement;
  std::string why;
};

// A row per parameter of the first layer and per parameter outside the layers.
std::vector<ParameterPlanRow> parameter_plan_rows(const std::vector<train::ParameterSpec>& specs,
                                                  const std::vector<PartitionSpec>& placements,
                                                  const train::ParameterShardings* shardings);

// parameter_plan_rows as a table, then ZeRO's notes.
std::string parameter_plan(const std::vector<train::ParameterSpec>& specs,
                           const std::vector<PartitionSpec>& placements,
                           const train::ParameterShardings* shardings);

// One line: what is replicated, what is sharded how and along which axes.
std::string sharding_plan(int zero, const train::ParallelContext& context, std::size_t units);

}  // namespace shardwise::cli

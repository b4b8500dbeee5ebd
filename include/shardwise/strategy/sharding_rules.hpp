#pragma once
// One rules file for a model: logical-axis rules, parameter-name rules and stage rules.

#include <string_view>

#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/parameter_rules.hpp"

namespace shardwise {

struct ShardingRules {
  LogicalAxisRules axis_rules;
  ParameterNameRules name_rules;
  // Which parts a rules file gave (the others are the defaults), so that a command that cannot
  // use a part can say so instead of ignoring it.
  bool gives_parameter_rules = false;
  bool gives_stage_rules = false;
};

// The defaults: default_logical_axis_rules(config) and ParameterNameRules::defaults().
ShardingRules default_sharding_rules(const ParallelismConfig& config);

// {"logical_axis_rules": [["embed", "fsdp"], ...],
//  "parameter_rules": [{"pattern": "...", "logical_axes": [...]}, ...],
//  "stage_rules": {"layer_pattern": "...", ...}}
// A part left out is the default: default_logical_axis_rules(config) and the default name
// rules. Unknown keys are errors.
ShardingRules load_sharding_rules(std::string_view text, const ParallelismConfig& config);

}  // namespace shardwise

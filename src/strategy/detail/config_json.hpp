#pragma once
// JSON readers for configs nested inside other documents; `path` names them in errors.

#include <nlohmann/json.hpp>
#include <string>

#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/parameter_rules.hpp"
#include "shardwise/strategy/sharding_config.hpp"

namespace shardwise::detail {

ShardingConfig sharding_config_from_json(const nlohmann::json& json, const std::string& path);

// A list of [logical name, mesh axes] pairs.
LogicalAxisRules logical_axis_rules_from_json(const nlohmann::json& list, const std::string& path);

// The "parameter_rules" list and "stage_rules" object, either absent (nullptr).
ParameterNameRules parameter_name_rules_from_json(const nlohmann::json* rule_list,
                                                  const nlohmann::json* stage_object);

}  // namespace shardwise::detail

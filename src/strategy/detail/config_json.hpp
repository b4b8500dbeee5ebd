#pragma once
// JSON readers for configs nested inside other documents; `path` names them in errors.

#include <nlohmann/json.hpp>
#include <string>

#include "shardwise/strategy/sharding_config.hpp"

namespace shardwise::detail {

ShardingConfig sharding_config_from_json(const nlohmann::json& json, const std::string& path);

}  // namespace shardwise::detail

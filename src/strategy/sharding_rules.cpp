#include "shardwise/strategy/sharding_rules.hpp"

#include "detail/config_json.hpp"
#include "detail/json_reader.hpp"

namespace shardwise {

ShardingRules default_sharding_rules(const ParallelismConfig& config) {
  return {default_logical_axis_rules(config), ParameterNameRules::defaults()};
}

ShardingRules load_sharding_rules(std::string_view text, const ParallelismConfig& config) {
  const nlohmann::json json = detail::parse_json(text, "rules");
  detail::JsonObjectReader reader(json, "");
  const nlohmann::json* axis_rules = reader.optional("logical_axis_rules");
  const nlohmann::json* parameter_rules = reader.optional("parameter_rules");
  const nlohmann::json* stage_rules = reader.optional("stage_rules");
  reader.finish();
  ParameterNameRules name_rules =
      detail::parameter_name_rules_from_json(parameter_rules, stage_rules);
  if (parameter_rules == nullptr) {
    name_rules =
        ParameterNameRules(ParameterNameRules::defaults().rules(), name_rules.stage_rules());
  }
  return {axis_rules != nullptr
              ? detail::logical_axis_rules_from_json(*axis_rules, "logical_axis_rules")
              : default_logical_axis_rules(config),
          std::move(name_rules), parameter_rules != nullptr, stage_rules != nullptr};
}

}  // namespace shardwise

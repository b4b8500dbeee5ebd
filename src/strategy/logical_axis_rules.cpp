#include "shardwise/strategy/logical_axis_rules.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "detail/config_json.hpp"
#include "detail/json_reader.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::string rule_text(const LogicalAxisRule& rule) {
  std::string axes;
  for (const std::string& axis : rule.mesh_axes) axes += (axes.empty() ? "'" : ", '") + axis + "'";
  return "('" + rule.logical_name + "', " + (axes.empty() ? "None" : "(" + axes + ")") + ")";
}

}  // namespace

LogicalAxisRules::LogicalAxisRules(std::vector<LogicalAxisRule> rules) : rules_(std::move(rules)) {
  std::map<std::tuple<std::string, std::vector<std::string>, std::int64_t, bool>, std::size_t> seen;
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const LogicalAxisRule& rule = rules_[i];
    if (rule.logical_name.empty()) {
      throw InvalidArgument("logical axis rule " + std::to_string(i) +
                            " has an empty logical name");
    }
    if (rule.min_size < 0) {
      throw InvalidArgument("logical axis rule " + rule_text(rule) + " has min_size " +
                            std::to_string(rule.min_size) + "; expected >= 0");
    }
    for (std::size_t a = 0; a < rule.mesh_axes.size(); ++a) {
      if (std::count(rule.mesh_axes.begin(), rule.mesh_axes.end(), rule.mesh_axes[a]) > 1) {
        throw InvalidArgument("logical axis rule " + rule_text(rule) + " names mesh axis '" +
                              rule.mesh_axes[a] + "' twice");
      }
    }
    // A second rule equal to an earlier one can never apply: whatever the first skips, it
    // skips too. It is a mistake in the rules, not a rule.
    const auto [earlier, fresh] = seen.emplace(
        std::tuple(rule.logical_name, rule.mesh_axes, rule.min_size, rule.relocatable), i);
    if (!fresh) {
      throw InvalidArgument("logical axis rule " + std::to_string(i) + " " + rule_text(rule) +
                            " repeats rule " + std::to_string(earlier->second));
    }
  }
}

namespace detail {

LogicalAxisRules logical_axis_rules_from_json(const nlohmann::json& list, const std::string& path) {
  if (!list.is_array()) {
    throw ParseError("field '" + path +
                     "' must be a list of [logical name, mesh axes] pairs, not " +
                     json_type_name(list));
  }
  std::vector<LogicalAxisRule> rules;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string field = path + "[" + std::to_string(i) + "]";
    const nlohmann::json& pair = list[i];
    if (!pair.is_array() || pair.size() < 2 || pair.size() > 3) {
      throw ParseError("field '" + field +
                       "' must be a [logical name, mesh axes] pair (and optionally "
                       "{\"min_size\": n, \"relocatable\": bool}), not " +
                       echo_input(pair.dump()));
    }
    LogicalAxisRule rule{json_string(pair[0], field + "[0]"), {}};
    if (pair[1].is_string()) {
      rule.mesh_axes = {pair[1].get<std::string>()};
    } else if (!pair[1].is_null()) {
      rule.mesh_axes = json_string_list(pair[1], field + "[1]");
    }
    if (pair.size() == 3) {
      JsonObjectReader options(pair[2], field + "[2]");
      rule.min_size = options.integer("min_size", 0);
      rule.relocatable = options.boolean("relocatable", false);
      options.finish();
    }
    rules.push_back(std::move(rule));
  }
  return LogicalAxisRules(std::move(rules));
}

}  // namespace detail

LogicalAxisRules LogicalAxisRules::from_json(std::string_view text) {
  const nlohmann::json json = detail::parse_json(text, "logical axis rules");
  detail::JsonObjectReader reader(json, "");
  LogicalAxisRules rules = detail::logical_axis_rules_from_json(reader.required("rules"), "rules");
  reader.finish();
  return rules;
}

std::string LogicalAxisRules::to_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const LogicalAxisRule& rule : rules_) {
    nlohmann::ordered_json axes = nullptr;
    if (rule.mesh_axes.size() == 1) axes = rule.mesh_axes[0];
    if (rule.mesh_axes.size() > 1) axes = rule.mesh_axes;
    nlohmann::ordered_json entry = {rule.logical_name, axes};
    nlohmann::ordered_json options = nlohmann::ordered_json::object();
    if (rule.min_size != 0) options["min_size"] = rule.min_size;
    if (rule.relocatable) options["relocatable"] = true;
    if (!options.empty()) entry.push_back(std::move(options));
    list.push_back(std::move(entry));
  }
  return nlohmann::ordered_json{{"rules", list}}.dump();
}

}  // namespace shardwise

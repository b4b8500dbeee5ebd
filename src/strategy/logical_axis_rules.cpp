#include "shardwise/strategy/logical_axis_rules.hpp"

#include <algorithm>
#include <optional>

#include "detail/config_json.hpp"
#include "detail/json_reader.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::string rule_text(const LogicalAxisRule& rule) {
  std::string axes;
  for (const std::string& axis : rule.mesh_axes) axes += (axes.empty() ? "'" : ", '") + axis + "'";
  return "('" + rule.logical_name + "', " + (axes.empty() ? "None" : "(" + axes + ")") + ")";
}

}  // namespace

LogicalAxisRules::LogicalAxisRules(std::vector<LogicalAxisRule> rules) : rules_(std::move(rules)) {
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const LogicalAxisRule& rule = rules_[i];
    if (rule.logical_name.empty()) {
      throw InvalidArgument("logical axis rule " + std::to_string(i) +
                            " has an empty logical name");
    }
    for (std::size_t a = 0; a < rule.mesh_axes.size(); ++a) {
      if (std::count(rule.mesh_axes.begin(), rule.mesh_axes.end(), rule.mesh_axes[a]) > 1) {
        throw InvalidArgument("logical axis rule " + rule_text(rule) + " names mesh axis '" +
                              rule.mesh_axes[a] + "' twice");
      }
    }
  }
}

PartitionSpec LogicalAxisRules::logical_to_mesh_axes(const LogicalAxes& logical_axes) const {
  for (std::size_t d = 0; d < logical_axes.size(); ++d) {
    if (logical_axes[d].empty()) continue;
    for (std::size_t e = 0; e < d; ++e) {
      if (logical_axes[e] == logical_axes[d]) {
        throw InvalidArgument("logical axis '" + logical_axes[d] + "' names dimensions " +
                              std::to_string(e) + " and " + std::to_string(d) +
                              "; logical names must be unique in a tensor");
      }
    }
  }
  std::vector<std::optional<std::vector<std::string>>> assigned(logical_axes.size());
  std::vector<std::string> used;
  for (const LogicalAxisRule& rule : rules_) {
    auto it = std::find(logical_axes.begin(), logical_axes.end(), rule.logical_name);
    if (it == logical_axes.end()) continue;
    auto& slot = assigned[static_cast<std::size_t>(it - logical_axes.begin())];
    if (slot) continue;
    const bool free = std::none_of(rule.mesh_axes.begin(), rule.mesh_axes.end(),
                                   [&](const std::string& axis) { return contains(used, axis); });
    if (!free) continue;
    slot = rule.mesh_axes;
    used.insert(used.end(), rule.mesh_axes.begin(), rule.mesh_axes.end());
  }
  std::vector<SpecEntry> entries;
  entries.reserve(assigned.size());
  for (auto& slot : assigned) entries.emplace_back(slot.value_or(std::vector<std::string>{}));
  return PartitionSpec(std::move(entries));
}

PartitionSpec LogicalAxisRules::logical_to_mesh_axes(const LogicalAxes& logical_axes,
                                                     const Mesh& mesh) const {
  for (const LogicalAxisRule& rule : rules_) {
    for (const std::string& axis : rule.mesh_axes) {
      if (!mesh.has_axis(axis)) {
        throw InvalidArgument("logical axis rule " + rule_text(rule) + " names mesh axis '" + axis +
                              "', which is not in " + mesh.to_string());
      }
    }
  }
  const PartitionSpec unfiltered = logical_to_mesh_axes(logical_axes);
  std::vector<SpecEntry> entries;
  for (const SpecEntry& entry : unfiltered.entries()) {
    std::vector<std::string> kept;
    for (const std::string& axis : entry.axes()) {
      if (mesh.axis_size(axis) > 1) kept.push_back(axis);
    }
    entries.emplace_back(std::move(kept));
  }
  return PartitionSpec(std::move(entries));
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
    if (!pair.is_array() || pair.size() != 2) {
      throw ParseError("field '" + field + "' must be a [logical name, mesh axes] pair, not " +
                       pair.dump());
    }
    LogicalAxisRule rule{json_string(pair[0], field + "[0]"), {}};
    if (pair[1].is_string()) {
      rule.mesh_axes = {pair[1].get<std::string>()};
    } else if (!pair[1].is_null()) {
      rule.mesh_axes = json_string_list(pair[1], field + "[1]");
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
    list.push_back({rule.logical_name, axes});
  }
  return nlohmann::ordered_json{{"rules", list}}.dump();
}

LogicalAxisRules default_logical_axis_rules(const ParallelismConfig& config) {
  config.validate();
  const ShardingConfig& sc = config.sharding_config;
  auto present = [&](std::string_view axis) {
    for (std::size_t a = 0; a < config.mesh_axis_names.size(); ++a) {
      if (config.mesh_axis_names[a] == axis && config.mesh_shape[a] > 1) return true;
    }
    return false;
  };
  std::vector<LogicalAxisRule> rules;
  auto add = [&](const char* name, std::vector<std::string> axes) {
    std::vector<std::string> kept;
    for (std::string& axis : axes) {
      if (present(axis)) kept.push_back(std::move(axis));
    }
    if (!kept.empty() || axes.empty()) rules.push_back({name, std::move(kept)});
  };
  const std::string data(kDataAxis);
  const std::string model(kModelAxis);
  const std::string fsdp = sc.fsdp_enabled ? sc.fsdp_axis_name() : std::string();
  add("batch", {data, std::string(kFsdpAxis)});
  // Weights the tensor strategy splits by output features, FSDP by their first dimension:
  // both together when both exist, else whichever is free.
  if (!fsdp.empty()) add("out_features", {model, fsdp});
  add("out_features", {model});
  if (!fsdp.empty()) add("out_features", {fsdp});
  for (const char* name : {"vocab", "heads", "kv_heads", "mlp"}) add(name, {model});
  if (!fsdp.empty()) {
    for (const char* name : {"embed", "hidden", "features"}) add(name, {fsdp});
  }
  for (const char* name : {"in_features", "sequence", "positions", "head_dim", "norm", "layers"}) {
    add(name, {});
  }
  return LogicalAxisRules(std::move(rules));
}

}  // namespace shardwise

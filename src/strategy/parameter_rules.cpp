#include "shardwise/strategy/parameter_rules.hpp"

#include <re2/re2.h>

#include "detail/config_json.hpp"
#include "detail/json_reader.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

struct ParameterNameRules::Compiled {
  std::vector<std::unique_ptr<RE2>> rules;
  std::unique_ptr<RE2> layer;
  std::unique_ptr<RE2> first_stage;
  std::unique_ptr<RE2> last_stage;
};

namespace {

std::unique_ptr<RE2> compile(const std::string& pattern, const std::string& what) {
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, options);
  if (!re->ok()) {
    throw InvalidArgument(what + " '" + pattern +
                          "' is not a valid regular expression: " + re->error());
  }
  return re;
}

ParameterRule rule(std::string pattern, LogicalAxes axes) {
  return {std::move(pattern), std::move(axes)};
}

}  // namespace

ParameterNameRules::ParameterNameRules(std::vector<ParameterRule> rules, StageRules stage_rules)
    : rules_(std::move(rules)),
      stage_rules_(std::move(stage_rules)),
      compiled_(std::make_unique<Compiled>()) {
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    compiled_->rules.push_back(
        compile(rules_[i].pattern, "parameter rule " + std::to_string(i) + " pattern"));
  }
  compiled_->layer = compile(stage_rules_.layer_pattern, "layer_pattern");
  if (compiled_->layer->NumberOfCapturingGroups() < 1) {
    throw InvalidArgument("layer_pattern '" + stage_rules_.layer_pattern +
                          "' has no capture group for the layer index");
  }
  compiled_->first_stage = compile(stage_rules_.first_stage_pattern, "first_stage_pattern");
  compiled_->last_stage = compile(stage_rules_.last_stage_pattern, "last_stage_pattern");
}

ParameterNameRules::~ParameterNameRules() = default;
ParameterNameRules::ParameterNameRules(ParameterNameRules&&) noexcept = default;
ParameterNameRules& ParameterNameRules::operator=(ParameterNameRules&&) noexcept = default;

ParameterNameRules ParameterNameRules::defaults() {
  const std::string end = R"(\.weight$)";
  const std::string bias = R"(\.bias$)";
  return ParameterNameRules({
      // Embeddings and the output head: (vocab, embed).
      rule(R"((?:^|\.)(?:wte|embed_tokens|tok_embeddings|word_embeddings))" + end,
           {"vocab", "embed"}),
      rule(R"((?:^|\.)(?:wpe|position_embeddings))" + end, {"positions", "embed"}),
      rule(R"((?:^|\.)(?:lm_head|output))" + end, {"vocab", "embed"}),
      // GPT-2 Conv1D weights are (in, out).
      rule(R"((?:^|\.)c_attn)" + end, {"embed", "heads"}),
      rule(R"((?:^|\.)c_attn)" + bias, {"heads"}),
      rule(R"((?:^|\.)attn\.c_proj)" + end, {"heads", "embed"}),
      rule(R"((?:^|\.)c_fc)" + end, {"embed", "mlp"}),
      rule(R"((?:^|\.)c_fc)" + bias, {"mlp"}),
      rule(R"((?:^|\.)mlp\.c_proj)" + end, {"mlp", "embed"}),
      rule(R"((?:^|\.)c_proj)" + bias, {"embed"}),
      // Llama-family nn.Linear weights are (out, in).
      rule(R"((?:^|\.)q_proj)" + end, {"heads", "embed"}),
      rule(R"((?:^|\.)q_proj)" + bias, {"heads"}),
      rule(R"((?:^|\.)(?:k_proj|v_proj))" + end, {"kv_heads", "embed"}),
      rule(R"((?:^|\.)(?:k_proj|v_proj))" + bias, {"kv_heads"}),
      rule(R"((?:^|\.)o_proj)" + end, {"embed", "heads"}),
      rule(R"((?:^|\.)(?:gate_proj|up_proj))" + end, {"mlp", "embed"}),
      rule(R"((?:^|\.)(?:gate_proj|up_proj))" + bias, {"mlp"}),
      rule(R"((?:^|\.)down_proj)" + end, {"embed", "mlp"}),
      rule(R"((?:^|\.)(?:o_proj|down_proj))" + bias, {"embed"}),
      // Norm scales and biases.
      rule(R"((?:^|\.)(?:ln_\w+|\w*layernorm|\w*layer_norm|norm)\.(?:weight|bias)$)", {"norm"}),
  });
}

std::optional<LogicalAxes> ParameterNameRules::logical_axes_for(std::string_view name,
                                                                std::size_t rank) const {
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    if (!RE2::PartialMatch(name, *compiled_->rules[i])) continue;
    if (rules_[i].logical_axes.size() != rank) {
      throw InvalidArgument("parameter '" + echo_input(name) + "' of rank " +
                            std::to_string(rank) + " matches rule '" + rules_[i].pattern +
                            "', which gives " + std::to_string(rules_[i].logical_axes.size()) +
                            " logical axes");
    }
    return rules_[i].logical_axes;
  }
  return std::nullopt;
}

std::optional<std::int64_t> ParameterNameRules::layer_index(std::string_view name) const {
  std::string digits;
  if (!RE2::PartialMatch(name, *compiled_->layer, &digits)) return std::nullopt;
  if (digits.empty() || digits.size() > 12 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    throw InvalidArgument("parameter '" + echo_input(name) + "': layer_pattern captured '" +
                          digits + "', not a layer index");
  }
  return std::stoll(digits);
}

std::int64_t ParameterNameRules::stage_of(std::string_view name,
                                          const std::vector<std::int64_t>& layers_per_stage) const {
  const StagePlacement placement = place_in_stage(name, layers_per_stage);
  if (placement.note) {
    throw InvalidArgument("parameter '" + std::string(name) +
                          "' has no layer index and matches neither the first-stage nor the "
                          "last-stage rule");
  }
  return placement.stage;
}

StagePlacement ParameterNameRules::place_in_stage(
    std::string_view name, const std::vector<std::int64_t>& layers_per_stage) const {
  const auto stages = static_cast<std::int64_t>(layers_per_stage.size());
  if (stages == 0) throw InvalidArgument("there are no pipeline stages to place parameters on");
  if (const auto layer = layer_index(name)) {
    std::int64_t first = 0;
    for (std::int64_t s = 0; s < stages; ++s) {
      first += layers_per_stage[static_cast<std::size_t>(s)];
      if (*layer < first) return {s, std::nullopt};
    }
    throw InvalidArgument("parameter '" + echo_input(name) + "' is in layer " +
                          std::to_string(*layer) + " but the stages hold " + std::to_string(first) +
                          " layers");
  }
  if (RE2::PartialMatch(name, *compiled_->first_stage)) return {0, std::nullopt};
  if (RE2::PartialMatch(name, *compiled_->last_stage)) return {stages - 1, std::nullopt};
  return {0, std::string(name) +
                 ": no layer index and neither the first-stage nor the last-stage rule matches "
                 "it: first stage"};
}

namespace detail {

ParameterNameRules parameter_name_rules_from_json(const nlohmann::json* rule_list,
                                                  const nlohmann::json* stage_object) {
  std::vector<ParameterRule> rules;
  if (rule_list != nullptr) {
    if (!rule_list->is_array()) {
      throw ParseError("field 'parameter_rules' must be a list, not " + json_type_name(*rule_list));
    }
    for (std::size_t i = 0; i < rule_list->size(); ++i) {
      JsonObjectReader entry((*rule_list)[i], "parameter_rules[" + std::to_string(i) + "]");
      ParameterRule r;
      r.pattern = entry.required_string("pattern");
      r.logical_axes = json_name_list(entry.required("logical_axes"), entry.field("logical_axes"));
      entry.finish();
      rules.push_back(std::move(r));
    }
  }
  StageRules stage_rules;
  if (stage_object != nullptr) {
    JsonObjectReader entry(*stage_object, "stage_rules");
    stage_rules.layer_pattern = entry.string("layer_pattern", stage_rules.layer_pattern);
    stage_rules.first_stage_pattern =
        entry.string("first_stage_pattern", stage_rules.first_stage_pattern);
    stage_rules.last_stage_pattern =
        entry.string("last_stage_pattern", stage_rules.last_stage_pattern);
    entry.finish();
  }
  return ParameterNameRules(std::move(rules), std::move(stage_rules));
}

}  // namespace detail

ParameterNameRules ParameterNameRules::from_json(std::string_view text) {
  const nlohmann::json json = detail::parse_json(text, "parameter rules");
  detail::JsonObjectReader reader(json, "");
  const nlohmann::json* rules = reader.optional("parameter_rules");
  const nlohmann::json* stages = reader.optional("stage_rules");
  reader.finish();
  return detail::parameter_name_rules_from_json(rules, stages);
}

}  // namespace shardwise

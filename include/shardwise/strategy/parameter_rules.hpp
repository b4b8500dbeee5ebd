#pragma once
// Parameter-name rules, the general form of the reference's create_partition_spec: ordered
// regular expressions over parameter paths ("model.layers.7.self_attn.q_proj.weight") that give
// each parameter its logical axes, and rules that give it a pipeline stage from the layer
// index in its name (embeddings on the first stage, final norm and head on the last).
// Patterns are RE2 expressions (linear time: a hostile name cannot make matching explode) and
// match anywhere in the name unless anchored.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

struct ParameterRule {
  std::string pattern;
  LogicalAxes logical_axes;
};

struct StageRules {
  // Its first capture group is the layer index ("layers.7.", "h.7.", "layer_7.").
  std::string layer_pattern = R"((?:^|\.)(?:h|layers|blocks|layer)[._](\d+)(?:\.|$))";
  // Parameters without a layer index that belong on the first stage.
  std::string first_stage_pattern =
      R"((?:^|\.)(?:embed\w*|wte|wpe|tok_embeddings|word_embeddings|position\w*)(?:\.|$))";
  // Parameters without a layer index that belong on the last stage.
  std::string last_stage_pattern =
      R"((?:^|\.)(?:lm_head|output|logits|ln_f|norm|final_layer_norm|final_norm)(?:\.|$))";
};

// A parameter's pipeline stage, and a note when no rule gave it.
struct StagePlacement {
  std::int64_t stage = 0;
  std::optional<std::string> note;
};

class ParameterNameRules {
 public:
  // Throws InvalidArgument naming a pattern that does not compile, or a layer pattern without
  // a capture group.
  ParameterNameRules(std::vector<ParameterRule> rules, StageRules stage_rules = {});
  ~ParameterNameRules();
  ParameterNameRules(ParameterNameRules&&) noexcept;
  ParameterNameRules& operator=(ParameterNameRules&&) noexcept;
  ParameterNameRules(const ParameterNameRules&) = delete;
  ParameterNameRules& operator=(const ParameterNameRules&) = delete;

  // The rules for GPT-2 and Llama-family names (docs/strategies.md lists them).
  static ParameterNameRules defaults();

  [[nodiscard]] const std::vector<ParameterRule>& rules() const { return rules_; }
  [[nodiscard]] const StageRules& stage_rules() const { return stage_rules_; }

  // The logical axes of the first rule whose pattern matches; nullopt when none does. Throws
  // InvalidArgument when that rule's axes do not fit the rank.
  [[nodiscard]] std::optional<LogicalAxes> logical_axes_for(std::string_view name,
                                                            std::size_t rank) const;

  // The layer index in the name, if any.
  [[nodiscard]] std::optional<std::int64_t> layer_index(std::string_view name) const;

  // The stage of a parameter, given the layers of each stage (from assign_layers_to_stages or
  // assign_layers_by_cost). Throws InvalidArgument for a layer beyond the stages' layers and
  // for a name with no layer index that neither stage rule matches.
  [[nodiscard]] std::int64_t stage_of(std::string_view name,
                                      const std::vector<std::int64_t>& layers_per_stage) const;
  // stage_of, except that a name with no layer index that neither stage rule matches goes to
  // the first stage with a note saying so.
  [[nodiscard]] StagePlacement place_in_stage(
      std::string_view name, const std::vector<std::int64_t>& layers_per_stage) const;

  // {"parameter_rules": [{"pattern": "...", "logical_axes": [...]}],
  //  "stage_rules": {"layer_pattern": ..., "first_stage_pattern": ..., "last_stage_pattern": ...}}
  // Both keys optional ("stage_rules" fields default as above); unknown keys are errors.
  static ParameterNameRules from_json(std::string_view text);

 private:
  struct Compiled;
  std::vector<ParameterRule> rules_;
  StageRules stage_rules_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace shardwise

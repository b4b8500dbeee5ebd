#pragma once
// Logical-axis rules with Flax / MaxText semantics: an ordered list of
// (logical name -> mesh axes | None). For each rule in order, if a tensor has a dimension with
// that logical name, the dimension has no assignment yet, and none of the rule's mesh axes is
// used by the tensor already, the dimension gets those axes. A rule to None assigns
// "replicated" and so blocks later rules for that name. Unassigned dimensions are replicated.

#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

struct LogicalAxisRule {
  std::string logical_name;
  // Major to minor; empty means None (replicated).
  std::vector<std::string> mesh_axes;
  friend bool operator==(const LogicalAxisRule&, const LogicalAxisRule&) = default;
};

class LogicalAxisRules {
 public:
  LogicalAxisRules() = default;
  // Throws InvalidArgument for an empty logical name or a rule that repeats a mesh axis.
  explicit LogicalAxisRules(std::vector<LogicalAxisRule> rules);

  [[nodiscard]] const std::vector<LogicalAxisRule>& rules() const { return rules_; }

  // Flax's logical_to_mesh_axes. Throws InvalidArgument when a logical name appears twice in
  // `logical_axes` ("" marks an unnamed dimension and may repeat).
  [[nodiscard]] PartitionSpec logical_to_mesh_axes(const LogicalAxes& logical_axes) const;

  // The same against a mesh: a rule naming an axis the mesh lacks is an error, and axes of
  // size 1 are dropped from the result (they split nothing).
  [[nodiscard]] PartitionSpec logical_to_mesh_axes(const LogicalAxes& logical_axes,
                                                   const Mesh& mesh) const;

  // {"rules": [["batch", ["data", "fsdp"]], ["embed", "fsdp"], ["norm", null]]}; unknown keys
  // and malformed rules are errors.
  static LogicalAxisRules from_json(std::string_view text);
  [[nodiscard]] std::string to_json() const;

 private:
  std::vector<LogicalAxisRule> rules_;
};

// The rules shardwise uses when none are given, for a parallelism config, in this order (only
// axes of size > 1 appear; "fsdp axis" is 'fsdp' with HSDP, 'data' with plain FSDP, absent
// without FSDP):
//   batch        -> (data, fsdp)          FSDP ranks split the batch as data ranks do
//   out_features -> (model, fsdp axis), then model, then fsdp axis
//   vocab, heads, kv_heads, mlp -> model  tensor-parallel dimensions
//   embed, hidden, features     -> fsdp axis
//   in_features, sequence, positions, head_dim, norm, layers -> None
// For the strategies' own names they give what default_strategies() combines to (see
// docs/strategies.md for the one difference: with HSDP the batch is split over 'fsdp' too).
LogicalAxisRules default_logical_axis_rules(const ParallelismConfig& config);

}  // namespace shardwise

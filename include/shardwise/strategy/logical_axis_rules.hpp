#pragma once
// Logical-axis rules with Flax / MaxText semantics: an ordered list of
// (logical name -> mesh axes | None). For each rule in order, if a tensor has a dimension with
// that logical name, the dimension has no assignment yet, and none of the rule's mesh axes is
// used by the tensor already, the dimension gets those axes. A rule to None assigns
// "replicated" and so blocks later rules for that name. Unassigned dimensions are replicated.
//
// Against a shape (resolve), shardwise adds what Flax leaves to the user, and says what it did:
//  - a rule fits a dimension only if the dimension has at least min_size elements and some
//    leading part of the rule's axes divides it (and its units); the largest such prefix is
//    kept. A rule that fits with no axis at all is skipped, so later rules for the name apply;
//  - axes cut off a multi-axis rule that way (a conflict: the dimension takes the major axes
//    but not all) move to the first free dimension they divide, and so do the axes of a
//    `relocatable` rule that did not fit; a free dimension is one no rule assigned;
//  - every axis that ends up neither where its rule put it nor anywhere else is dropped with a
//    note. Axes of size 1 split nothing and are ignored.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/logical_axes.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/spec_resolution.hpp"

namespace shardwise {

struct LogicalAxisRule {
  std::string logical_name;
  // Major to minor; empty means None (replicated).
  std::vector<std::string> mesh_axes;
  // The rule applies only to dimensions with at least this many elements (FSDP's
  // min_weight_size); checked only against a shape.
  std::int64_t min_size = 0;
  // When the rule's axes do not divide the dimension, they may go to another free dimension
  // they divide (FSDP's "shard another dimension" fallback) instead of being dropped.
  bool relocatable = false;
  friend bool operator==(const LogicalAxisRule&, const LogicalAxisRule&) = default;
};

class LogicalAxisRules {
 public:
  LogicalAxisRules() = default;
  // Throws InvalidArgument for an empty logical name, a rule that repeats a mesh axis, a
  // negative min_size, or a rule equal to an earlier one (it could never apply).
  explicit LogicalAxisRules(std::vector<LogicalAxisRule> rules);

  [[nodiscard]] const std::vector<LogicalAxisRule>& rules() const { return rules_; }

  // Flax's logical_to_mesh_axes. Throws InvalidArgument when a logical name appears twice in
  // `logical_axes` ("" marks an unnamed dimension and may repeat).
  [[nodiscard]] PartitionSpec logical_to_mesh_axes(const LogicalAxes& logical_axes) const;

  // The same against a mesh: a rule naming an axis the mesh lacks is an error, and axes of
  // size 1 are ignored. Equals resolve(...).spec without a shape.
  [[nodiscard]] PartitionSpec logical_to_mesh_axes(const LogicalAxes& logical_axes,
                                                   const Mesh& mesh) const;

  // The spec of tensor `tensor_name` with these logical axes on `mesh`, fitted to the shape of
  // `options` as the header comment says, with a note per moved or dropped axis. Throws
  // InvalidArgument for a shape of another rank, or a dimension that is not a whole number of
  // its units; ShardingError for a note in strict mode.
  [[nodiscard]] SpecResolution resolve(const std::string& tensor_name,
                                       const LogicalAxes& logical_axes, const Mesh& mesh,
                                       const ResolveOptions& options = {}) const;

  // {"rules": [["batch", ["data", "fsdp"]], ["embed", "fsdp", {"min_size": 1024}],
  //  ["norm", null]]}; the optional third element holds min_size and relocatable. Unknown keys
  // and malformed rules are errors.
  static LogicalAxisRules from_json(std::string_view text);
  [[nodiscard]] std::string to_json() const;

 private:
  std::vector<LogicalAxisRule> rules_;
};

// The rules shardwise uses when none are given: those of default_strategies(config) (see
// MultiDimensionalStrategy::logical_axis_rules), so that the rules and the strategies are one
// source of truth. With data, FSDP and tensor parallelism (only axes of size > 1 appear; "fsdp
// axis" is 'fsdp' with HSDP, 'data' with FSDP over data):
//   batch                          -> (data, fsdp axis), then data, then fsdp axis
//   out_features                   -> (model, fsdp axis), then model, then fsdp axis
//   embed, hidden, features        -> fsdp axis
//   vocab, heads, kv_heads, mlp    -> model
// FSDP's rules apply to dimensions of at least fsdp_min_weight_size elements.
LogicalAxisRules default_logical_axis_rules(const ParallelismConfig& config);

}  // namespace shardwise

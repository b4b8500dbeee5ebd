#pragma once
// How a whole model lies on a mesh: every parameter's logical axes (from the manifest or the
// parameter-name rules), partition spec (from the logical-axis rules), shard shape and
// pipeline stage, and the parameter bytes each device holds.

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/parameter_rules.hpp"

namespace shardwise {

struct ParameterLayout {
  ParameterInfo parameter;
  // One name per dimension; "" where neither the manifest nor a rule names it.
  LogicalAxes logical_axes;
  PartitionSpec spec;
  Shape shard_shape;
  std::int64_t stage = 0;
};

struct ModelLayout {
  Mesh mesh;
  // The axis whose coordinate is the stage; empty with one stage.
  std::string pipeline_axis;
  std::vector<std::int64_t> layers_per_stage;
  std::vector<ParameterLayout> parameters;
  // Parameter bytes on each device, in mesh order.
  std::vector<std::int64_t> bytes_per_device;
  // Everything the rules asked for that the layout could not do, in words: axes moved or
  // dropped from dimensions they do not divide, parameters no rule named (replicated), and
  // parameters no stage rule placed (first stage).
  std::vector<std::string> notes;
  // About the mesh rather than one parameter: each axis whose rules name dimensions the model
  // has but that splits none of them, and why (FSDP's min_weight_size above every such
  // dimension; an axis dividing none).
  std::vector<std::string> axis_notes;

  [[nodiscard]] std::int64_t max_bytes_per_device() const;
  // Per stage, the most bytes any of its devices holds.
  [[nodiscard]] std::vector<std::int64_t> max_bytes_by_stage() const;
};

struct LayoutOptions {
  // Strict: an axis that does not divide its dimension is dropped (and noted). Uneven: it is
  // kept, with torch.chunk shards.
  Evenness evenness = Evenness::kStrict;
  // The mesh axis whose coordinate is the pipeline stage (absent: one stage).
  std::string pipeline_axis = "pipeline";
  // Everything a note would report (an unnamed parameter, a stage no rule gives, an axis moved
  // or dropped) is an error instead.
  bool strict = false;
};

// Throws InvalidArgument for a spec that would split a parameter over the pipeline axis, and
// the errors of the rules (a parameter no stage rule places, a rule of the wrong rank).
ModelLayout layout_model(const ModelManifest& manifest, const Mesh& mesh,
                         const LogicalAxisRules& axis_rules, const ParameterNameRules& name_rules,
                         const LayoutOptions& options = {});

}  // namespace shardwise

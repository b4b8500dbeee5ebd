#pragma once
// What `shardwise specs` shows: every parameter's logical axes, spec, shard shape and stage,
// and the bytes per device, for a person or as JSON.

#include <string>
#include <vector>

#include "shardwise/strategy/model_layout.hpp"

namespace shardwise::cli {

std::string render_specs_text(const ModelLayout& layout);
// One JSON object, without a trailing newline. `held_shapes` (parameter order; empty: each its
// shard shape) are the blocks a device of the trainer holds, "held_shape": a shard shape but where
// the trainer holds less than a PartitionSpec can say (train::SharedRows).
std::string render_specs_json(const ModelLayout& layout,
                              const std::vector<Shape>& held_shapes = {});

}  // namespace shardwise::cli

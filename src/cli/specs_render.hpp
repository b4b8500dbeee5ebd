#pragma once
// What `shardwise specs` shows: every parameter's logical axes, spec, shard shape and stage,
// and the bytes per device, for a person or as JSON.

#include <string>

#include "shardwise/strategy/model_layout.hpp"

namespace shardwise::cli {

std::string render_specs_text(const ModelLayout& layout);
// One JSON object, without a trailing newline.
std::string render_specs_json(const ModelLayout& layout);

}  // namespace shardwise::cli

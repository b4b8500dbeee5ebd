#pragma once
// What `shardwise layout` shows: a person's report (summary, table, drawing) and the JSON.

#include <string>

#include "shardwise/core/named_sharding.hpp"

namespace shardwise::cli {

// Summary lines, the device table and, for 1-D and 2-D arrays, the drawing.
std::string render_layout_text(const NamedSharding& sharding, const Shape& global_shape);

// The one-line JSON object of `shardwise layout --json`, without a trailing newline.
std::string render_layout_json(const NamedSharding& sharding, const Shape& global_shape);

// The array split into blocks, each labelled with the devices that hold it, as
// jax.debug.visualize_array_sharding draws it. 1-D and 2-D arrays only; empty string otherwise.
std::string draw_sharding(const NamedSharding& sharding, const Shape& global_shape);

}  // namespace shardwise::cli

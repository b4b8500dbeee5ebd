#pragma once
// The element type of what passes between a model's chunks: a micro-batch's residual stream
// forward, its gradient backward, and so the pipeline's messages, whose dtype follows it.

#include "shardwise/core/element_type.hpp"

namespace shardwise::train {

using BoundaryElement = float;
inline constexpr DType kBoundaryType = dtype_of<BoundaryElement>();

}  // namespace shardwise::train

#pragma once
// What a layer keeps for backward (Korthikanti et al. 2022): one enum for the planner, which
// predicts its memory and FLOPs, and for the trainer's models, which run it. kNone keeps every
// activation; kSelective recomputes the attention core (its seq x seq weights are never kept);
// kFull keeps each layer's input alone and runs the layer's forward again in its backward.

#include <string>

namespace shardwise {

enum class Recompute { kNone, kSelective, kFull };

// "none", "selective", "full".
[[nodiscard]] std::string to_string(Recompute recompute);
// The inverse; InvalidArgument naming `field` and the text for anything else.
[[nodiscard]] Recompute parse_recompute(const std::string& text, const std::string& field);

}  // namespace shardwise

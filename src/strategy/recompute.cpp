#include "shardwise/strategy/recompute.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

std::string to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

Recompute parse_recompute(const std::string& text, const std::string& field) {
  for (const Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (text == to_string(r)) return r;
  }
  throw InvalidArgument(field + " is '" + echo_input(text) + "'; expected none, selective or full");
}

}  // namespace shardwise

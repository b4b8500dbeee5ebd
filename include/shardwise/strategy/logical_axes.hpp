#pragma once
// The logical names of a tensor's dimensions ("batch", "embed", "heads", ...), which rules and
// strategies map to mesh axes.

#include <string>
#include <vector>

namespace shardwise {

// One logical name per tensor dimension; "" leaves a dimension unnamed.
using LogicalAxes = std::vector<std::string>;

}  // namespace shardwise

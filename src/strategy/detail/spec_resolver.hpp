#pragma once
// The one resolver behind every "which spec does this tensor get" answer.

#include <string>

#include "shardwise/strategy/logical_axis_rules.hpp"

namespace shardwise::detail {

// LogicalAxisRules::resolve, with `mesh` optional (without one nothing is filtered or fitted)
// and, when `name_dimensions` is false, notes that speak of dimensions by index only (for
// rules made up from positional specs, whose names mean nothing to a user).
SpecResolution resolve_rules(const std::vector<LogicalAxisRule>& rules,
                             const std::string& tensor_name, const LogicalAxes& logical_axes,
                             const Mesh* mesh, const ResolveOptions& options,
                             bool name_dimensions);

}  // namespace shardwise::detail

#pragma once
// The parts of the module, one file each.

#include <nanobind/nanobind.h>

namespace shardwise::python {

// Mesh, PartitionSpec, NamedSharding, placements.
void bind_core(nanobind::module_& m);
// ShardingConfig, ParallelismConfig, the strategies, MultiDimensionalStrategy, mesh utilities.
void bind_strategy(nanobind::module_& m);
// Model manifests, clusters, layouts, plan and search.
void bind_plan(nanobind::module_& m);

}  // namespace shardwise::python

#pragma once
// The configurations and mesh utilities of the reference module, and the words the bindings
// take for the strategies' enums.

#include <nanobind/nanobind.h>

#include <map>
#include <string>

#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"

namespace shardwise::python {

// ShardingConfig and ParallelismConfig.
void bind_configs(nanobind::module_& m);
// create_device_mesh, DeviceMeshManager, get_optimal_mesh_shape, validate_mesh_config,
// optimize_for_transformer.
void bind_mesh_utils(nanobind::module_& m);

// "replicate", "shard_other_dimension", "shard_other_dimension_else_uneven"; InvalidArgument
// naming `fallback` otherwise.
FsdpFallback fsdp_fallback_from(const std::string& text);
std::string to_text(FsdpFallback fallback);
// "out_in" (PyTorch's nn.Linear) or "in_out" (Flax's Dense, GPT-2's Conv1D).
WeightLayout weight_layout_from(const std::string& text);
std::string to_text(WeightLayout layout);
// "column" or "row".
LinearKind linear_kind_from(const std::string& text);
// {strategy name: spec}.
std::map<std::string, PartitionSpec> proposed_specs(nanobind::handle proposed);

}  // namespace shardwise::python

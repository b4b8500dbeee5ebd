#pragma once
// Every parameter placed over the whole mesh. The model axis splits a parameter for good: a
// rank stores and computes with its block (Megatron-LM's tensor parallelism); ZeRO's axes (fsdp,
// and data where ZeRO shards over it) split that block further (ParameterShardings). A
// parameter's placement over the mesh combines both, the model axis major.

#include <string_view>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/parameter_rules.hpp"
#include "shardwise/train/parameter_store.hpp"

namespace shardwise::train {

inline constexpr std::string_view kModelAxis = "model";
inline constexpr std::string_view kPipelineAxis = "pipeline";

// Each parameter of a model's manifest split over the mesh's model axis: the spec `shardwise
// specs` lays it out with (layout_model over the whole mesh, the same rules, the manifest's
// axis units: an axis that does not divide a dimension's whole heads leaves it whole), with
// only the entries naming 'model' kept; P() for every parameter where the mesh has no model
// axis.
[[nodiscard]] std::vector<PartitionSpec> model_placements(const ModelManifest& manifest,
                                                          const Mesh& mesh,
                                                          const LogicalAxisRules& axis_rules,
                                                          const ParameterNameRules& name_rules);

// What `device` holds of each parameter under those placements: its block (shape and block set,
// the whole's shape kept in global_shape); a parameter the placement leaves whole is unchanged.
// InvalidArgument naming the parameter where a placement names another axis than 'model' or the
// model axis does not divide the dimension it splits.
[[nodiscard]] std::vector<ParameterSpec> local_parameters(
    const std::vector<ParameterSpec>& parameters, const Mesh& mesh, DeviceId device,
    const std::vector<PartitionSpec>& placements);

// A parameter's placement over the whole mesh: the model axis' split of the whole and ZeRO's
// split of the block (entries naming the shard axis), the model axis major where both split one
// dimension.
[[nodiscard]] PartitionSpec whole_mesh_placement(const PartitionSpec& model,
                                                 const PartitionSpec& zero, std::size_t rank);

}  // namespace shardwise::train

#pragma once
// Every parameter placed over the whole mesh. The model axis splits a parameter for good: a
// rank stores and computes with its block (Megatron-LM's tensor parallelism); so does the expert
// axis, whose ranks hold experts of their own of a Mixture of Experts' stacked weights. ZeRO's
// axes (fsdp, and data where ZeRO shards over it) split that block further (ParameterShardings).
// A parameter's placement over the mesh combines both, the model and expert axes major.

#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/parameter_rules.hpp"
#include "shardwise/train/parameter_store.hpp"

namespace shardwise::train {

// The mesh's axis names are the strategies' (strategy/parallelism_config.hpp): kModelAxis,
// kPipelineAxis.

// Each parameter of a model's manifest split over the mesh's model and expert axes: the spec
// `shardwise specs` lays it out with (layout_model over the whole mesh, the same rules, the
// manifest's axis units: an axis that does not divide a dimension's whole heads leaves it
// whole), with only the entries naming 'model' or 'expert' kept; P() for every parameter where
// the mesh has neither axis.
[[nodiscard]] std::vector<PartitionSpec> model_placements(const ModelManifest& manifest,
                                                          const Mesh& mesh,
                                                          const LogicalAxisRules& axis_rules,
                                                          const ParameterNameRules& name_rules);

// A parameter its placement leaves whole of which each model rank holds and computes with one
// block of rows, as no PartitionSpec can say: its first dimension cut into `blocks` equal blocks,
// model rank r holding block r / (degree / blocks), so that each block is held by degree /
// blocks consecutive model ranks, which sum their gradients of it among themselves. Grouped-query
// attention's key/value heads where there are fewer of them than model ranks (vLLM's rule).
struct SharedRows {
  std::size_t parameter = 0;  // in the model's parameters() order
  std::size_t blocks = 0;
  friend bool operator==(const SharedRows&, const SharedRows&) = default;
};

// The model axis' size, 1 where the mesh has none.
[[nodiscard]] int model_degree(const Mesh& mesh);
// The expert axis' size, 1 where the mesh has none.
[[nodiscard]] int expert_degree(const Mesh& mesh);

// How a shared parameter's rows lie over the model axis, in words: "rows in 2 blocks over
// 'model', each on 2 ranks", or "whole on each of the 4 'model' ranks" for one block.
[[nodiscard]] std::string shared_rows_words(std::size_t blocks, std::size_t sharers);

// What `device` holds of each parameter under those placements: its block (shape and block set,
// the whole's shape kept in global_shape; a block split over an expert axis of more than one rank
// is not averaged over it, gradient.averaged_over); a parameter the placement leaves whole is
// unchanged but for its rows where `shared` names it (gradient.model_sharers set).
// InvalidArgument naming the parameter where a placement names another axis than 'model' or
// 'expert', the axis does not divide
// the dimension it splits, or a shared parameter is placed otherwise than whole or its rows or
// the model axis are not a multiple of its blocks.
[[nodiscard]] std::vector<ParameterSpec> local_parameters(
    const std::vector<ParameterSpec>& parameters, const Mesh& mesh, DeviceId device,
    const std::vector<PartitionSpec>& placements, const std::vector<SharedRows>& shared = {});

// A parameter's placement over the whole mesh: the model axis' split of the whole and ZeRO's
// split of the block (entries naming the shard axis), the model axis major where both split one
// dimension.
[[nodiscard]] PartitionSpec whole_mesh_placement(const PartitionSpec& model,
                                                 const PartitionSpec& zero, std::size_t rank);

}  // namespace shardwise::train

#pragma once
// How ZeRO splits each parameter over the ranks of its shard group, decided by the strategies:
// one partition spec per parameter on a one-axis mesh of the group, as NamedSharding lays it
// out. A rank keeps its block of each parameter (values under ZeRO-3, gradients under 2 and 3,
// optimizer state under 1 to 3); a parameter whose spec does not use the axis is replicated,
// and every rank keeps all of it.

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/parameter_rules.hpp"
#include "shardwise/train/parameter_store.hpp"

namespace shardwise::train {

struct ParameterShardings {
  // The shard group as a mesh of one axis ("fsdp": 4).
  std::string axis = "fsdp";
  std::int64_t size = 1;
  // One per parameter, in the store's order; they name no axis but `axis`.
  std::vector<PartitionSpec> specs;
  // kUneven where a spec splits a dimension the group does not divide (FSDP2's torch.chunk
  // blocks; a divided dimension's blocks are the same either way).
  Evenness evenness = Evenness::kStrict;
  // One per parameter: why it got its spec, in words.
  std::vector<std::string> reasons;
  // What the rules asked for and the layout could not do (rules_shardings), in words.
  std::vector<std::string> notes;

  // Throws InvalidArgument naming the parameter where a spec does not fit it (another axis, an
  // axis that does not divide its dimension, more entries than dimensions) or the count of
  // specs differs from the parameters'.
  void validate(const std::vector<ParameterSpec>& parameters) const;
  // Elements a rank keeps of the sharded state: every parameter's shard shape.
  [[nodiscard]] std::int64_t shard_elements(const std::vector<ParameterSpec>& parameters) const;
};

// Which of a parameter's descriptions FSDP reads.
enum class FsdpSplit {
  // Dimension 0, as the reference's FSDPStrategy.apply_sharding and PyTorch FSDP2's Shard(0)
  // do (with the strategy's minimum size and fallback).
  kFirstDimension,
  // The parameter's logical axes, through the strategy's logical-axis rules (MaxText's FSDP:
  // the "embed" dimension); parameters without logical axes as kFirstDimension.
  kLogicalAxes,
};

// The strategy's spec for every parameter on a group of `size` ranks along its axis.
[[nodiscard]] ParameterShardings fsdp_shardings(const std::vector<ParameterSpec>& parameters,
                                                const FSDPStrategy& strategy, std::int64_t size,
                                                FsdpSplit split = FsdpSplit::kFirstDimension);

// The trainer's default: FSDP over `axis` that splits every parameter it can (minimum weight
// size 1; a dimension 0 the group does not divide gives way to a later dimension it divides).
[[nodiscard]] ParameterShardings default_shardings(const std::vector<ParameterSpec>& parameters,
                                                   const std::string& axis, std::int64_t size);

// The parameters as layout_model reads them: names, shapes, fp32, and the logical axes they
// declare (none where they declare none).
[[nodiscard]] ModelManifest manifest_of(const std::vector<ParameterSpec>& parameters);

// The layout `shardwise specs` shows (layout_model) of the parameters on `mesh`, logical axes from
// the parameters or else from the name rules, restricted to `axis`: the model axis' entries are
// left out (`parameters` are the blocks it gives a rank already), and a spec naming another axis
// of the mesh is an InvalidArgument (the trainer replicates parameters over the other axes).
[[nodiscard]] ParameterShardings rules_shardings(const std::vector<ParameterSpec>& parameters,
                                                 const Mesh& mesh, const std::string& axis,
                                                 const LogicalAxisRules& axis_rules,
                                                 const ParameterNameRules& name_rules);

}  // namespace shardwise::train

#pragma once
// The axes a training mesh may name, as a registry of roles: the batch split (data), the
// parameters' shards (fsdp: ZeRO and FSDP), the layers' split (model: tensor and sequence
// parallelism), the pipeline, and the two roles this series of capabilities adds (expert
// parallelism's experts and context parallelism's sequence). The training layer's context, its
// job's checks, the planner's layouts and the commands take their lists from here, so an axis is
// added in one place.

#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/mesh.hpp"

namespace shardwise {

enum class AxisRole { kBatch, kParameterShard, kModelSplit, kPipeline, kExperts, kSequence };

struct MeshAxisRole {
  std::string name;  // "data": what a mesh calls it
  AxisRole role;
  std::string what;  // "data parallelism (the batch split, gradients averaged)"
  bool trained;      // whether the training layer runs it yet
};

// Every role, in the order a layout names the axes (data, fsdp, model, pipeline, expert,
// context).
[[nodiscard]] const std::vector<MeshAxisRole>& mesh_axis_roles();
// The role of the axis `name`; nullptr for a name no role has.
[[nodiscard]] const MeshAxisRole* find_mesh_axis(std::string_view name);
// The axis of `role`.
[[nodiscard]] const MeshAxisRole& mesh_axis(AxisRole role);
// "data, fsdp, model, pipeline": the axes the training layer runs, for messages.
[[nodiscard]] std::string trained_axis_names();
// Throws InvalidArgument starting with `field` where `mesh` names an axis no role has, or one the
// training layer does not run yet (naming it and what it is).
void check_trained_axes(const Mesh& mesh, const std::string& field);

}  // namespace shardwise

#include "shardwise/strategy/mesh_axes.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

const std::vector<MeshAxisRole>& mesh_axis_roles() {
  static const std::vector<MeshAxisRole> roles{
      {"data", AxisRole::kBatch, "data parallelism (the batch split, gradients averaged)", true},
      {"fsdp", AxisRole::kParameterShard,
       "sharded data parallelism (the batch split, ZeRO's parameters, gradients and optimizer "
       "state sharded)",
       true},
      {"model", AxisRole::kModelSplit,
       "tensor parallelism (each layer's heads, MLP and vocabulary split; with sequence "
       "parallelism the residual stream too)",
       true},
      {"pipeline", AxisRole::kPipeline, "pipeline parallelism (the layers split into stages)",
       true},
      {"expert", AxisRole::kExperts,
       "expert parallelism (a Mixture-of-Experts layer's experts split, tokens dispatched to "
       "them, the batch split with the data axes)",
       true},
      {"context", AxisRole::kSequence,
       "context parallelism (every activation split along the sequence, attention across the "
       "ranks)",
       false}};
  return roles;
}

const MeshAxisRole* find_mesh_axis(std::string_view name) {
  for (const MeshAxisRole& axis : mesh_axis_roles()) {
    if (axis.name == name) return &axis;
  }
  return nullptr;
}

const MeshAxisRole& mesh_axis(AxisRole role) {
  for (const MeshAxisRole& axis : mesh_axis_roles()) {
    if (axis.role == role) return axis;
  }
  throw InvalidArgument("no mesh axis has the role asked for");
}

std::string trained_axis_names() {
  std::string names;
  for (const MeshAxisRole& axis : mesh_axis_roles()) {
    if (axis.trained) names += (names.empty() ? "" : ", ") + axis.name;
  }
  return names;
}

void check_trained_axes(const Mesh& mesh, const std::string& field) {
  for (const std::string& name : mesh.axis_names()) {
    const MeshAxisRole* axis = find_mesh_axis(name);
    if (axis == nullptr) {
      throw InvalidArgument(field + ": axis '" + name + "' is not one the training layer knows (" +
                            trained_axis_names() + ")");
    }
    if (!axis->trained) {
      throw InvalidArgument(field + ": axis '" + name + "' is " + axis->what +
                            ", which the training layer does not run yet (it runs " +
                            trained_axis_names() + ")");
    }
  }
}

}  // namespace shardwise

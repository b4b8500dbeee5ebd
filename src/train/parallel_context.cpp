#include "shardwise/train/parallel_context.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/mesh_axes.hpp"

namespace shardwise::train {

void ParallelContext::validate(const Mesh& mesh, int world_size) {
  check_trained_axes(mesh, "mesh");
  if (mesh.size() != world_size) {
    throw InvalidArgument(mesh.to_string() + " has " + std::to_string(mesh.size()) +
                          " devices but the job has " + std::to_string(world_size) + " ranks");
  }
  if (!mesh.has_default_device_ids()) {
    throw InvalidArgument(mesh.to_string() +
                          " names devices; a training mesh runs rank r as device r, so give "
                          "the axes only");
  }
}

namespace {

bool splits(const Mesh& mesh, const char* axis) {
  return mesh.has_axis(axis) && mesh.axis_size(axis) > 1;
}

}  // namespace

std::string ParallelContext::shard_axis_of(const Mesh& mesh) {
  if (splits(mesh, "fsdp") || (mesh.has_axis("fsdp") && !mesh.has_axis("data"))) return "fsdp";
  return mesh.has_axis("data") ? "data" : "";
}

std::string ParallelContext::replica_axis_of(const Mesh& mesh) {
  return splits(mesh, "fsdp") && splits(mesh, "data") ? "data" : "";
}

ParallelContext::ParallelContext(Communicator& world, Mesh mesh)
    : world_(world),
      mesh_(std::move(mesh)),
      shard_axis_(shard_axis_of(mesh_)),
      replica_axis_(replica_axis_of(mesh_)),
      along_(mesh_axis_roles().size()) {
  validate(mesh_, world_.size());
  // Every rank splits in the same order: the mesh's axes in mesh order, then itself alone.
  for (const std::string& axis : mesh_.axis_names()) {
    along_[axis_slot(axis)] = world_.split(mesh_, {axis});
  }
  alone_ = world_.split(mesh_, {});
}

ParallelContext::~ParallelContext() = default;

std::size_t ParallelContext::axis_slot(std::string_view axis) const {
  const std::vector<MeshAxisRole>& roles = mesh_axis_roles();
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i].name == axis) return i;
  }
  throw InvalidArgument("'" + std::string(axis) + "' is not an axis of the training layer (" +
                        trained_axis_names() + ")");
}

int ParallelContext::coordinate(std::string_view axis) const {
  (void)axis_slot(axis);
  if (!mesh_.has_axis(axis)) return 0;
  return static_cast<int>(mesh_.coords_of(world_.rank())[mesh_.axis_index(axis)]);
}

int ParallelContext::degree(std::string_view axis) const {
  (void)axis_slot(axis);
  return mesh_.has_axis(axis) ? static_cast<int>(mesh_.axis_size(axis)) : 1;
}

Communicator& ParallelContext::communicator(std::string_view axis) const {
  const std::unique_ptr<Communicator>& along = along_[axis_slot(axis)];
  return along ? *along : *alone_;
}

Communicator& ParallelContext::communicator(AxisRole role) const {
  return communicator(mesh_axis(role).name);
}

int ParallelContext::degree(AxisRole role) const { return degree(mesh_axis(role).name); }

Group ParallelContext::group(std::string_view axis) const {
  return world_group(communicator(axis).size()).relabeled(std::string(axis));
}

std::vector<Rank> ParallelContext::ranks_along(std::string_view axis) const {
  return communicator(axis).world_ranks();
}

int ParallelContext::data_parallel_size_of(const Mesh& mesh) {
  int size = 1;
  for (const char* axis : {"data", "fsdp", "expert"}) {
    if (mesh.has_axis(axis)) size *= static_cast<int>(mesh.axis_size(axis));
  }
  return size;
}

int ParallelContext::data_parallel_size() const { return data_parallel_size_of(mesh_); }

int ParallelContext::data_parallel_index() const {
  return (coordinate("data") * degree("fsdp") + coordinate("fsdp")) * degree("expert") +
         coordinate("expert");
}

std::map<std::string, std::int64_t> ParallelContext::bytes_sent_by_axes() const {
  std::map<std::string, std::int64_t> sent;
  const auto add = [&](const Communicator& comm) {
    for (const auto& [key, count] : comm.counters().entries()) sent[key.axes] += count.sent;
  };
  add(world_);
  for (const auto& along : along_) {
    if (along) add(*along);
  }
  add(*alone_);
  return sent;
}

}  // namespace shardwise::train

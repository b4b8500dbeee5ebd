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

// `mesh` with the expert axis moved last, every device where it was: its groups along the model
// and expert axes list their ranks model major whatever order the mesh names the two in.
Mesh expert_axis_last(const Mesh& mesh) {
  std::vector<std::string> names;
  std::vector<std::int64_t> sizes;
  std::vector<std::size_t> source;  // the reordered axis i is the mesh's source[i]
  for (std::size_t a = 0; a < mesh.num_axes(); ++a) {
    if (mesh.axis_names()[a] == "expert") continue;
    names.push_back(mesh.axis_names()[a]);
    sizes.push_back(mesh.axis_sizes()[a]);
    source.push_back(a);
  }
  names.emplace_back("expert");
  sizes.push_back(mesh.axis_size("expert"));
  source.push_back(mesh.axis_index("expert"));
  std::vector<DeviceId> ids(static_cast<std::size_t>(mesh.size()));
  std::vector<std::int64_t> coords(mesh.num_axes());
  for (std::size_t position = 0; position < ids.size(); ++position) {
    auto rest = static_cast<std::int64_t>(position);
    for (std::size_t i = names.size(); i-- > 0;) {
      coords[source[i]] = rest % sizes[i];
      rest /= sizes[i];
    }
    ids[position] = mesh.device_at(coords);
  }
  return Mesh(std::move(names), std::move(sizes), std::move(ids));
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
  if (splits(mesh_, "expert") && splits(mesh_, "model")) {
    experts_ = world_.split(expert_axis_last(mesh_), {"model", "expert"});
  }
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

Communicator& ParallelContext::experts_communicator() const {
  if (experts_) return *experts_;
  return communicator(degree("model") > 1 ? "model" : "expert");
}

Group ParallelContext::experts_group() const {
  if (experts_) return world_group(experts_->size()).relabeled("model+expert");
  return group(degree("model") > 1 ? "model" : "expert");
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
  if (experts_) add(*experts_);
  return sent;
}

}  // namespace shardwise::train

#pragma once
// Where a rank of a training run sits: the mesh (its axes among the registry's roles,
// strategy/mesh_axes.hpp: data, fsdp, model, pipeline and expert trained today), this rank's
// coordinate on each axis, and one communicator per axis, split from the world once (as
// Megatron-LM's parallel_state makes every process group in one place). The trainer, the models'
// layers and `shardwise train` all take it; none builds groups of its own. Each axis has its own
// communicator, so collectives of different axes never wait in one queue (tensor-parallel traffic
// does not queue behind FSDP's).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/strategy/mesh_axes.hpp"

namespace shardwise::train {

class ParallelContext {
 public:
  // Collective over `world` (every rank constructs it with the same mesh, in the same order
  // among its collectives). Throws InvalidArgument for an axis the training layer does not run
  // (check_trained_axes), a mesh of
  // another size than the world, or device ids other than 0..n-1 in mesh order (rank r is
  // device r).
  ParallelContext(Communicator& world, Mesh mesh);
  ~ParallelContext();
  ParallelContext(const ParallelContext&) = delete;
  ParallelContext& operator=(const ParallelContext&) = delete;

  // Throws what the constructor throws for `mesh`, without a communicator (a command checks its
  // --mesh before it starts any rank).
  static void validate(const Mesh& mesh, int world_size);
  // ZeRO's axes on `mesh`: parameters, gradients and optimizer state are sharded over fsdp where
  // it splits (size > 1, or there is no data axis), else over data (empty: neither axis); the
  // shards are replicated over data where both split (HSDP; empty otherwise). The planner's
  // rule (plan::Layout) to the letter.
  [[nodiscard]] static std::string shard_axis_of(const Mesh& mesh);
  [[nodiscard]] static std::string replica_axis_of(const Mesh& mesh);
  // The ranks among which the global batch is split on `mesh` (data x fsdp x expert).
  [[nodiscard]] static int data_parallel_size_of(const Mesh& mesh);

  [[nodiscard]] const Mesh& mesh() const { return mesh_; }
  [[nodiscard]] Communicator& world() const { return world_; }
  [[nodiscard]] Rank rank() const { return world_.rank(); }

  // This rank's coordinate along `axis` and the axis' size: 0 and 1 where the mesh has no such
  // axis. InvalidArgument for a name no role of the registry has.
  [[nodiscard]] int coordinate(std::string_view axis) const;
  [[nodiscard]] int degree(std::string_view axis) const;

  // The communicator of this rank's group along `axis` (the ranks that share its coordinates on
  // every other axis); where the mesh has no such axis, one of this rank alone.
  [[nodiscard]] Communicator& communicator(std::string_view axis) const;
  // The same, by the axis' role.
  [[nodiscard]] Communicator& communicator(AxisRole role) const;
  [[nodiscard]] int degree(AxisRole role) const;
  // A communicator of this rank alone.
  [[nodiscard]] Communicator& alone() const { return *alone_; }
  // Every member of communicator(axis), counted under `axis` in its byte counters.
  [[nodiscard]] Group group(std::string_view axis) const;
  // The world ranks of that group, in group order.
  [[nodiscard]] std::vector<Rank> ranks_along(std::string_view axis) const;

  // The ranks a Mixture of Experts' experts are split over (Megatron-LM's "parallel folding",
  // expert tensor parallelism 1): this rank's group along the model and expert axes, model
  // major (member m x expert degree + e), as P(('model', 'expert')) places the experts. Its
  // communicator (the model or the expert axis' own where only one of them splits), its group
  // (counted under "model+expert" where both split), its size and this rank's member index.
  [[nodiscard]] Communicator& experts_communicator() const;
  [[nodiscard]] Group experts_group() const;
  [[nodiscard]] int experts_degree() const { return degree("model") * degree("expert"); }
  [[nodiscard]] int experts_index() const {
    return coordinate("model") * degree("expert") + coordinate("expert");
  }

  [[nodiscard]] const std::string& shard_axis() const { return shard_axis_; }
  [[nodiscard]] const std::string& replica_axis() const { return replica_axis_; }
  // The ranks among which the global batch is split (data x fsdp x expert), and this rank's
  // place (data major, expert minor).
  [[nodiscard]] int data_parallel_size() const;
  [[nodiscard]] int data_parallel_index() const;

  // Bytes this rank has sent, by the axes label they were counted under, in every communicator
  // of the context (the world's included).
  [[nodiscard]] std::map<std::string, std::int64_t> bytes_sent_by_axes() const;

 private:
  [[nodiscard]] std::size_t axis_slot(std::string_view axis) const;

  Communicator& world_;
  Mesh mesh_;
  std::string shard_axis_;
  std::string replica_axis_;
  // One per role of the registry: the axis' communicator, or nullptr where the mesh lacks it.
  std::vector<std::unique_ptr<Communicator>> along_;
  std::unique_ptr<Communicator> alone_;
  // Along the model and expert axes where both split; null otherwise.
  std::unique_ptr<Communicator> experts_;
};

}  // namespace shardwise::train

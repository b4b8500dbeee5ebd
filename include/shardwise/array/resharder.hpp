#pragma once
// Resharding with compiled plans kept for reuse: what a training step that reshards the same
// arrays every iteration wants. The first reshard of a (source layout, target layout, shape,
// dtype, pending reductions) compiles its plan: the matching collective along the axes that
// change (Shard -> Replicate: all-gather; Shard(i) -> Shard(j): all-to-all; Partial -> Shard:
// reduce-scatter; Partial -> Replicate: all-reduce; Replicate -> Shard: a local slice), or else
// pieces sent once by one holder each over only the ranks that send or receive; with staging
// allocated once. Later reshards of the same key reuse it.

#include <cstddef>
#include <memory>
#include <unordered_map>

#include "shardwise/array/sharded_array.hpp"

namespace shardwise {

namespace detail {
struct ReshardPlan;
}  // namespace detail

class Resharder {
 public:
  explicit Resharder(Communicator& comm);
  ~Resharder();
  Resharder(const Resharder&) = delete;
  Resharder& operator=(const Resharder&) = delete;
  Resharder(Resharder&&) noexcept;
  Resharder& operator=(Resharder&&) = delete;

  // The same global array with the target sharding (same devices), nothing pending. Collective
  // over the ranks of the array's mesh (which may be a part of the communicator's ranks, a
  // pipeline stage); only they call it.
  ShardedArray reshard(const ShardedArray& array, const NamedSharding& target);
  // The same into an existing array (a view of a flat buffer, say) of the target sharding,
  // the same global shape and dtype and nothing pending; partial sources reduce straight into
  // it where the pattern allows.
  void reshard_into(const ShardedArray& array, ShardedArray& target);

  // Plans compiled so far (for tests and benchmarks).
  [[nodiscard]] std::size_t plans() const { return plans_.size(); }

 private:
  // The plan under `key` (plan_key of the two layouts), compiled on first use.
  detail::ReshardPlan& plan_for(std::size_t key, const ShardedArray& array,
                                const NamedSharding& target);

  Communicator& comm_;
  std::unordered_map<std::size_t, std::unique_ptr<detail::ReshardPlan>> plans_;
};

}  // namespace shardwise

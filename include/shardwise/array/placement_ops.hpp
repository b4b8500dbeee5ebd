#pragma once
// Creating, gathering and resharding ShardedArrays. Every function here is collective: every
// rank of the communicator calls it with the same arguments (but its own data). Mesh device
// ids are the ranks; the mesh must cover every rank of the communicator exactly once.

#include <vector>

#include "shardwise/array/sharded_array.hpp"

namespace shardwise {

// Every rank holds the whole host array (row-major, global_shape, dtype): each keeps its own
// block. No communication.
ShardedArray shard_replicated(Communicator& comm, const void* host, const Shape& global_shape,
                              DType dtype, const NamedSharding& sharding);

// Only `root` holds the host array (`host` is ignored elsewhere): root sends every other rank
// its block (a scatter); one copy per distinct block and rank.
ShardedArray scatter_from(Communicator& comm, Rank root, const void* host,
                          const Shape& global_shape, DType dtype, const NamedSharding& sharding);

// The whole array on every rank (row-major bytes). Pending partial reductions are applied.
std::vector<std::byte> gather(Communicator& comm, const ShardedArray& array);
// The whole array on `root`; other ranks get an empty vector.
std::vector<std::byte> gather_to(Communicator& comm, const ShardedArray& array, Rank root);

// The same global array with the target sharding (same mesh), its pending reductions done.
// Data moves once: every piece a rank needs and does not hold is sent by one holder (the
// holders take turns, so replicas share the load); pieces a rank holds already are copied
// locally. Partial arrays are reduced with a reduce-scatter where the target splits a
// dimension over exactly the partial axes, else with an all-reduce over them first.
ShardedArray reshard(Communicator& comm, const ShardedArray& array, const NamedSharding& target);

// The same into an existing array of the target sharding (same global shape and dtype, nothing
// pending), reusing its buffer: what a training step that reshards every iteration wants.
// Partial sources are reduced as reshard does.
void reshard_into(Communicator& comm, const ShardedArray& array, ShardedArray& target);

}  // namespace shardwise

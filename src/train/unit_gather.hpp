#pragma once
// A unit's all-gather over the ZeRO shard group, the one way every ZeRO stage rebuilds a unit's
// full values from the members' chunks (ZeRO 1 and 2 after the update, ZeRO-3 before each use
// and when the values are read back).

#include <cstddef>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/element_type.hpp"
#include "unit_shards.hpp"

namespace shardwise::train::detail {

// Starts moving every member's chunk of `unit` (this member's is `mine`) into `staging`
// (shards.chunk(unit) x group.size() elements); UnitShards::unpack makes them the full unit.
inline Work start_unit_gather(Communicator& comm, const Group& group, const UnitShards& shards,
                              std::size_t unit, const float* mine, float* staging) {
  return comm.iall_gather(mine, staging, shards.chunk(unit), element_type(mine), group);
}

// The same, finished and unpacked into the unit's full elements at `full`.
inline void gather_unit(Communicator& comm, const Group& group, const UnitShards& shards,
                        std::size_t unit, const float* mine, float* staging, float* full) {
  comm.all_gather(mine, staging, shards.chunk(unit), element_type(mine), group);
  shards.unpack(unit, staging, full);
}

}  // namespace shardwise::train::detail

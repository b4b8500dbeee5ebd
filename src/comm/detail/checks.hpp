#pragma once
// Argument checks and byte accounting every backend shares.

#include <cstddef>

#include "shardwise/comm/byte_counters.hpp"
#include "shardwise/comm/group.hpp"

namespace shardwise::detail {

// This rank's member index in the group; throws InvalidArgument naming the operation when the
// group names a rank outside 0..world_size-1, names one twice, or leaves this rank out.
int member_index(const Group& group, Rank rank, int world_size, const char* op);

// Throws InvalidArgument unless `peer` is another rank of 0..world_size-1.
void check_peer(Rank peer, Rank rank, int world_size, const char* op);

// A collective in which every member sends and receives `block_bytes` to and from each other
// member (all-gather, reduce-scatter, all-to-all).
void record_exchange(ByteCounters& counters, const char* op, const Group& group,
                     std::size_t block_bytes);

}  // namespace shardwise::detail

#pragma once
// The local backend: N ranks as threads of this process, moving data through shared memory.

#include <functional>

#include "shardwise/comm/communicator.hpp"

namespace shardwise {

// The most ranks (threads) one run_local starts.
inline constexpr int kMaxLocalRanks = 4096;

struct LocalOptions {
  // Whether collectives and resharding may read peers' buffers directly (with_peer_buffers).
  // Off, they take the paths that work where ranks do not share memory: for tests.
  bool share_buffers = true;
};

// Runs fn on ranks 0..num_ranks-1, each on its own thread with its own Communicator, and
// returns when all have finished. When a rank throws, the ranks waiting on it fail promptly
// with a CommError naming it, and run_local throws a CommError that starts with
// "rank R failed: " and the first failure's message. When the system cannot start a thread,
// the ranks already started fail, are joined, and a CommError says which rank could not
// start. Throws InvalidArgument for num_ranks outside 1..kMaxLocalRanks.
void run_local(int num_ranks, const std::function<void(Communicator&)>& fn,
               const LocalOptions& options = {});

}  // namespace shardwise

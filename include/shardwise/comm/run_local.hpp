#pragma once
// The local backend: N ranks as threads of this process, moving data through shared memory.

#include <functional>

#include "shardwise/comm/communicator.hpp"

namespace shardwise {

// Runs fn on ranks 0..num_ranks-1, each on its own thread with its own Communicator, and
// returns when all have finished. When a rank throws, the ranks waiting on it fail promptly
// with a CommError naming it, and run_local throws a CommError that starts with
// "rank R failed: " and the first failure's message. Throws InvalidArgument for num_ranks < 1.
void run_local(int num_ranks, const std::function<void(Communicator&)>& fn);

}  // namespace shardwise

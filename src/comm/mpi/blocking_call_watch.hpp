#pragma once
// A blocking MPI collective cannot time out: once every member has met, MPI_Allreduce and
// MPI_Bcast wait inside MPI for as long as a member takes. A member that stops inside one (a
// SIGSTOPped process, a host gone) would hold the others forever. While such a call runs, a
// watchdog thread holds its deadline; past it, the watchdog writes one line naming the call and
// ends the job as a failed process does (MPI_Abort, status 3: the runtime failed).

#include <chrono>
#include <cstdint>
#include <string>

namespace shardwise::detail {

class BlockingCallWatch {
 public:
  // `what`: "all_reduce over [0, 1] on rank 0"; `timeout`: the operation's.
  BlockingCallWatch(std::string what, std::chrono::milliseconds timeout,
                    std::chrono::steady_clock::time_point deadline);
  ~BlockingCallWatch();
  BlockingCallWatch(const BlockingCallWatch&) = delete;
  BlockingCallWatch& operator=(const BlockingCallWatch&) = delete;

 private:
  std::uint64_t serial_;
};

}  // namespace shardwise::detail

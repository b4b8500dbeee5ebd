#pragma once
// The kinds of communication, as byte counters and signatures name them.

#include <cstdint>
#include <string>

namespace shardwise {

enum class CommOp : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kAllToAllv,
  kBroadcast,
  kBarrier,
  kPpermute,
  kSend,
  kRecv,
};

// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "broadcast",
// "barrier", "ppermute", "send", "recv".
std::string to_string(CommOp op);

}  // namespace shardwise

#pragma once
// One operation as a backend receives it: validated, with everything it needs copied so that
// it may run after the call that started it has returned.

#include <string>
#include <vector>

#include "shardwise/comm/comm_op.hpp"
#include "shardwise/comm/communicator.hpp"

namespace shardwise::detail {

struct OpRequest {
  // kSend stands for any batch of point-to-point messages (sends and receives).
  CommOp op = CommOp::kBarrier;
  // The caller waits on it at once: a backend may run it on the calling thread when nothing
  // else is in flight.
  bool blocking = false;
  // One buffer, or several for a coalesced all-reduce or reduce-scatter; point-to-point
  // operations use `messages` instead.
  std::vector<CoalescedBuffer> buffers;
  DType dtype = DType::kF32;
  ReduceOp reduce = ReduceOp::kSum;
  Rank root = -1;  // broadcast: a rank of this communicator
  std::vector<PermutePair> pairs;
  BlockLayout send;
  BlockLayout receive;
  Group group;  // ranks of this communicator
  CommOptions options;
  // send, recv and batches: the messages; sends hold their data in `payloads`, copied when
  // the operation started (a send's buffer may be reused at once).
  std::vector<P2POp> messages;
  std::vector<std::vector<std::byte>> payloads;
  // Where every member's bytes are counted (all_to_allv), else empty.
  std::vector<std::string> member_axes;
  std::string p2p_axes = "p2p";

  // "all_reduce" and so on, for messages.
  [[nodiscard]] std::string name() const;
};

}  // namespace shardwise::detail

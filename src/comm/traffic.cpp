#include "detail/traffic.hpp"

#include <algorithm>

namespace shardwise::detail {
namespace {

std::int64_t bytes(std::size_t elements, DType dtype) {
  return static_cast<std::int64_t>(elements * size_in_bytes(dtype));
}

}  // namespace

std::string OpRequest::name() const { return to_string(op); }

void traffic_of(const OpRequest& request, int member, std::vector<TrafficRecord>& records) {
  records.clear();
  const auto n = static_cast<std::size_t>(request.group.size());
  const auto self = static_cast<std::size_t>(member);
  const std::string& axes = request.group.axes();
  const DType dtype = request.dtype;
  switch (request.op) {
    case CommOp::kSend:
    case CommOp::kRecv: {
      for (std::size_t i = 0; i < request.messages.size(); ++i) {
        const P2POp& m = request.messages[i];
        const std::int64_t moved = bytes(m.count, m.dtype);
        if (m.kind == P2POp::Kind::kSend) {
          records.push_back({CommOp::kSend, request.p2p_axes, moved, 0});
        } else {
          records.push_back({CommOp::kRecv, request.p2p_axes, 0, moved});
        }
      }
      return;
    }
    case CommOp::kBarrier: return;
    default: break;
  }
  if (n <= 1) return;
  std::int64_t sent = 0;
  std::int64_t received = 0;
  for (const CoalescedBuffer& buffer : request.buffers) {
    const std::size_t count = buffer.count;
    switch (request.op) {
      case CommOp::kAllReduce: {
        const std::size_t own = (self + 1) * count / n - self * count / n;
        sent += 2 * bytes(count - own, dtype);
        received += 2 * bytes(count - own, dtype);
        break;
      }
      case CommOp::kAllGather:
      case CommOp::kReduceScatter:
      case CommOp::kAllToAll:
        sent += bytes((n - 1) * count, dtype);
        received += bytes((n - 1) * count, dtype);
        break;
      case CommOp::kBroadcast: {
        const bool root = request.group[self] == request.root;
        sent += root ? bytes((n - 1) * count, dtype) : 0;
        received += root ? 0 : bytes(count, dtype);
        break;
      }
      case CommOp::kPpermute:
        for (const PermutePair& p : request.pairs) {
          if (p.source == p.destination) continue;
          if (static_cast<std::size_t>(p.source) == self) sent += bytes(count, dtype);
          if (static_cast<std::size_t>(p.destination) == self) received += bytes(count, dtype);
        }
        break;
      default: break;
    }
  }
  if (request.op == CommOp::kAllToAllv) {
    for (std::size_t j = 0; j < n; ++j) {
      if (j == self) continue;
      const std::int64_t out = bytes(request.send.counts[j], dtype);
      const std::int64_t in = bytes(request.receive.counts[j], dtype);
      if (request.member_axes.empty()) {
        sent += out;
        received += in;
      } else if (out > 0 || in > 0) {
        records.push_back({CommOp::kAllToAllv, request.member_axes[j], out, in});
      }
    }
    if (!request.member_axes.empty()) return;
  }
  if (sent > 0 || received > 0) records.push_back({request.op, axes, sent, received});
}

}  // namespace shardwise::detail

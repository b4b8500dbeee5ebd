#pragma once
// The logical bytes of each operation, defined once for every backend.

#include <cstdint>
#include <string>
#include <vector>

#include "op_request.hpp"

namespace shardwise::detail {

struct TrafficRecord {
  CommOp op;
  std::string axes;
  std::int64_t sent = 0;
  std::int64_t received = 0;
};

// What member `member` of the request's group (or this rank, for point-to-point) sends and
// receives for the operation:
//   all_reduce      2 (count - own chunk) both ways, chunks of count split over the members
//                   as member i's [i count / n, (i + 1) count / n) (a ring's traffic)
//   all_gather, reduce_scatter, all_to_all
//                   (n - 1) blocks of count both ways
//   all_to_allv     what it sends to and receives from the other members
//   broadcast       the root sends (n - 1) x count, every other member receives count
//   ppermute        what crosses to or from another member
//   send, recv      the message
//   barrier         nothing
// One record per (op, axes); none where nothing moves (a group of one, a member a ppermute
// leaves out), so `calls` counts the calls that moved bytes. Fills `records` (cleared first;
// its capacity is reused).
void traffic_of(const OpRequest& request, int member, std::vector<TrafficRecord>& records);

}  // namespace shardwise::detail

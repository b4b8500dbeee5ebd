#pragma once
// What a rank sent and received, per operation and per mesh axes, so that predictions of
// traffic can be checked against what really moved. The counts are logical bytes, defined once
// per operation (detail/traffic.cpp) and the same on every backend: what each rank must send
// and receive for the result, whatever algorithm moves it (docs/runtime.md). The bytes an
// algorithm puts on the wire (a ring all-reduce's 2(n-1)/n, a tree broadcast's relays) depend
// on the backend's choice and are not counted.

#include <compare>
#include <cstdint>
#include <map>
#include <string>

#include "shardwise/comm/comm_op.hpp"

namespace shardwise {

struct ByteCount {
  std::int64_t sent = 0;
  std::int64_t received = 0;
  std::int64_t calls = 0;
  friend bool operator==(const ByteCount&, const ByteCount&) = default;
};

// An operation and the mesh axes it ran along, in mesh order ("data+model"), as group_along
// labels groups; "world" for every rank, "p2p" for unlabelled messages.
struct TrafficKey {
  CommOp op = CommOp::kAllReduce;
  std::string axes;
  friend auto operator<=>(const TrafficKey&, const TrafficKey&) = default;
};

class ByteCounters {
 public:
  void record(CommOp op, const std::string& axes, std::int64_t sent, std::int64_t received);
  void clear() { entries_.clear(); }

  [[nodiscard]] const std::map<TrafficKey, ByteCount>& entries() const { return entries_; }
  [[nodiscard]] ByteCount total() const;
  [[nodiscard]] ByteCount for_op(CommOp op) const;
  [[nodiscard]] ByteCount for_axes(const std::string& axes) const;

  // {"total": {...}, "by_op": {"all_gather": {...}}, "by_axes": {...}, "entries": [...]}
  [[nodiscard]] std::string to_json() const;

 private:
  std::map<TrafficKey, ByteCount> entries_;
};

}  // namespace shardwise

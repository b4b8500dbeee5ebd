#include "shardwise/comm/byte_counters.hpp"

#include <nlohmann/json.hpp>

namespace shardwise {
namespace {

void add(ByteCount& into, const ByteCount& from) {
  into.sent += from.sent;
  into.received += from.received;
  into.calls += from.calls;
}

nlohmann::ordered_json to_json_value(const ByteCount& count) {
  return {{"sent", count.sent}, {"received", count.received}, {"calls", count.calls}};
}

}  // namespace

std::string to_string(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kReduceScatter: return "reduce_scatter";
    case CommOp::kAllToAll: return "all_to_all";
    case CommOp::kAllToAllv: return "all_to_allv";
    case CommOp::kBroadcast: return "broadcast";
    case CommOp::kBarrier: return "barrier";
    case CommOp::kPpermute: return "ppermute";
    case CommOp::kSend: return "send";
    case CommOp::kRecv: return "recv";
  }
  return "?";
}

void ByteCounters::record(CommOp op, const std::string& axes, std::int64_t sent,
                          std::int64_t received) {
  ByteCount& entry = entries_[TrafficKey{op, axes}];
  entry.sent += sent;
  entry.received += received;
  entry.calls += 1;
}

ByteCount ByteCounters::total() const {
  ByteCount sum;
  for (const auto& [key, count] : entries_) add(sum, count);
  return sum;
}

ByteCount ByteCounters::for_op(CommOp op) const {
  ByteCount sum;
  for (const auto& [key, count] : entries_) {
    if (key.op == op) add(sum, count);
  }
  return sum;
}

ByteCount ByteCounters::for_axes(const std::string& axes) const {
  ByteCount sum;
  for (const auto& [key, count] : entries_) {
    if (key.axes == axes) add(sum, count);
  }
  return sum;
}

std::string ByteCounters::to_json() const {
  nlohmann::ordered_json by_op = nlohmann::ordered_json::object();
  nlohmann::ordered_json by_axes = nlohmann::ordered_json::object();
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const auto& [key, count] : entries_) {
    by_op[to_string(key.op)] = to_json_value(for_op(key.op));
    by_axes[key.axes] = to_json_value(for_axes(key.axes));
    nlohmann::ordered_json entry = {{"op", to_string(key.op)}, {"axes", key.axes}};
    entry.update(to_json_value(count));
    entries.push_back(std::move(entry));
  }
  return nlohmann::ordered_json{{"total", to_json_value(total())},
                                {"by_op", std::move(by_op)},
                                {"by_axes", std::move(by_axes)},
                                {"entries", std::move(entries)}}
      .dump();
}

}  // namespace shardwise

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

void ByteCounters::record(const std::string& op, const std::string& axes, std::int64_t sent,
                          std::int64_t received) {
  ByteCount& entry = entries_[{op, axes}];
  entry.sent += sent;
  entry.received += received;
  entry.calls += 1;
}

ByteCount ByteCounters::total() const {
  ByteCount sum;
  for (const auto& [key, count] : entries_) add(sum, count);
  return sum;
}

ByteCount ByteCounters::for_op(const std::string& op) const {
  ByteCount sum;
  for (const auto& [key, count] : entries_) {
    if (key.first == op) add(sum, count);
  }
  return sum;
}

ByteCount ByteCounters::for_axes(const std::string& axes) const {
  ByteCount sum;
  for (const auto& [key, count] : entries_) {
    if (key.second == axes) add(sum, count);
  }
  return sum;
}

std::string ByteCounters::to_json() const {
  nlohmann::ordered_json by_op = nlohmann::ordered_json::object();
  nlohmann::ordered_json by_axes = nlohmann::ordered_json::object();
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const auto& [key, count] : entries_) {
    by_op[key.first] = to_json_value(for_op(key.first));
    by_axes[key.second] = to_json_value(for_axes(key.second));
    nlohmann::ordered_json entry = {{"op", key.first}, {"axes", key.second}};
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

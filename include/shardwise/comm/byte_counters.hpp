#pragma once
// What a rank sent and received, per operation kind and per mesh axes, so that predictions of
// traffic can be checked against what really moved.

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace shardwise {

struct ByteCount {
  std::int64_t sent = 0;
  std::int64_t received = 0;
  std::int64_t calls = 0;
  friend bool operator==(const ByteCount&, const ByteCount&) = default;
};

class ByteCounters {
 public:
  void record(const std::string& op, const std::string& axes, std::int64_t sent,
              std::int64_t received);
  void clear() { entries_.clear(); }

  // Keyed by (operation, axes): ("all_gather", "model").
  [[nodiscard]] const std::map<std::pair<std::string, std::string>, ByteCount>& entries() const {
    return entries_;
  }
  [[nodiscard]] ByteCount total() const;
  [[nodiscard]] ByteCount for_op(const std::string& op) const;
  [[nodiscard]] ByteCount for_axes(const std::string& axes) const;
  // {"total": {...}, "by_op": {"all_gather": {...}}, "by_axes": {...}, "entries": [...]}
  [[nodiscard]] std::string to_json() const;

 private:
  std::map<std::pair<std::string, std::string>, ByteCount> entries_;
};

}  // namespace shardwise

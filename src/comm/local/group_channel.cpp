#include "group_channel.hpp"

namespace shardwise::detail {
namespace {

// The state word: bits 0-12 members arrived (up to 4096), bits 13-47 the round, bits 48-59
// the member that broke the channel, bit 63 broken.
constexpr int kRoundShift = 13;
constexpr int kBreakerShift = 48;
constexpr std::uint64_t kArrivedMask = (std::uint64_t{1} << kRoundShift) - 1;
constexpr std::uint64_t kBreakerMask = (std::uint64_t{1} << 12) - 1;
constexpr std::uint64_t kBrokenBit = std::uint64_t{1} << 63;

}  // namespace

bool calls_match(const CollectiveCall& a, const CollectiveCall& b) {
  return a.op == b.op && a.count == b.count && a.dtype == b.dtype && a.root == b.root &&
         a.reduce_op == b.reduce_op && a.agreement == b.agreement;
}

std::string call_text(const CollectiveCall& call) {
  return std::string(call.op) + " of " + std::to_string(call.count) + " " + to_string(call.dtype) +
         (call.reduce_op ? " (" + to_string(*call.reduce_op) + ")" : "") +
         (call.root >= 0 ? " from root " + std::to_string(call.root) : "") +
         (call.agreement.empty() ? "" : " " + call.agreement);
}

std::uint64_t GroupChannel::State::pack() const {
  return (broken ? kBrokenBit : 0) |
         ((static_cast<std::uint64_t>(breaker) & kBreakerMask) << kBreakerShift) |
         ((round & kRoundMask) << kRoundShift) |
         (static_cast<std::uint64_t>(arrived) & kArrivedMask);
}

GroupChannel::State GroupChannel::State::unpack(std::uint64_t word) {
  State state;
  state.broken = (word & kBrokenBit) != 0;
  state.breaker = static_cast<int>((word >> kBreakerShift) & kBreakerMask);
  state.round = (word >> kRoundShift) & kRoundMask;
  state.arrived = static_cast<int>(word & kArrivedMask);
  return state;
}

GroupChannel::GroupChannel(std::vector<Rank> world_ranks)
    : world_ranks_(std::move(world_ranks)),
      members_(std::make_unique<Member[]>(world_ranks_.size())) {}

void GroupChannel::wake() {
  // seq_cst, paired with the sleeper's increment: either it sees the change it waits for, or
  // this sees it sleeping. Taking the mutex keeps the notification from slipping between its
  // last look and its wait.
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  std::lock_guard lock(mutex_);
  woken_.notify_all();
}

}  // namespace shardwise::detail

#pragma once
// The rendezvous of one group of local ranks for its collectives, without a lock on the common
// path. Every member publishes its call in its own slot and arrives by one compare-and-swap on
// the channel's state word; the last to arrive checks that the calls match. A member that
// gives up before everyone has arrived breaks the channel with the same compare-and-swap, so
// either the round completes (and no member leaves while peers read its buffers) or it never
// does (and no member reads the buffers of one that left). A broken channel stays broken, as
// a NCCL communicator does after an error: every later collective on it fails at once.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise::detail {

// One member's part in a collective: what it called and its buffers.
struct CollectiveCall {
  CollectiveCall() = default;
  CollectiveCall(std::string_view op_name, std::size_t element_count, DType element_type,
                 Rank root_rank, const void* input, void* output)
      : op(op_name),
        count(element_count),
        dtype(element_type),
        root(root_rank),
        in(input),
        out(output) {}

  std::string_view op;  // a string literal
  std::size_t count = 0;
  DType dtype = DType::kF32;
  Rank root = -1;
  const void* in = nullptr;
  void* out = nullptr;
  const BlockLayout* send_layout = nullptr;  // all_to_allv only
  // Every buffer of a (coalesced) all-reduce or reduce-scatter.
  const std::vector<CoalescedBuffer>* buffers = nullptr;
  // The reduction (all-reduce, reduce-scatter); every member must pass the same one.
  std::optional<ReduceOp> reduce_op;
  // What else every member must agree on, as text compared by value (ppermute's pairs).
  std::string agreement;
};

// Whether two members' calls agree on everything members must agree on.
bool calls_match(const CollectiveCall& a, const CollectiveCall& b);
// "all_reduce of 8 f64 (sum)", for errors.
std::string call_text(const CollectiveCall& call);

class CallView;

class GroupChannel {
 public:
  // The channel's state word: whether it is broken (and by which member), the round that
  // is gathering (or broke) and how many members have arrived at it.
  struct State {
    bool broken = false;
    int breaker = 0;
    std::uint64_t round = 0;
    int arrived = 0;

    [[nodiscard]] std::uint64_t pack() const;
    static State unpack(std::uint64_t word);
  };
  // Rounds are numbered modulo 2^35; two members are never more than one round apart.
  static constexpr std::uint64_t kRoundMask = (std::uint64_t{1} << 35) - 1;

  // A member's call of a round, and the flag that says it is there: on the same cache line,
  // so that a peer that sees the flag has the call's first fields with it.
  struct alignas(64) Published {
    std::atomic<std::uint64_t> joined{0};  // 1 + the round of `call`
    CollectiveCall call;
  };

  // One member's slot. What peers poll, what peers read once a round, and what only the
  // member itself touches lie on separate cache lines, so that writing one does not take the
  // others from the cores that read them. Fields marked "own" are written by that member only.
  struct alignas(64) Member {
    std::atomic<std::uint64_t> failed_in{0};       // 1 + the last round its own part threw in
    alignas(64) std::uint64_t next_round = 0;      // own
    std::uint64_t phases = 0;                      // own: phases this member has finished, ever
    std::string breaking_reason;                   // own: read once it broke the channel
    Published published[2];                        // own: by round parity
    alignas(64) std::vector<std::byte> staged[2];  // own: an eager round's input, by parity
  };

  explicit GroupChannel(std::vector<Rank> world_ranks);

  [[nodiscard]] const std::vector<Rank>& world_ranks() const { return world_ranks_; }
  [[nodiscard]] std::size_t size() const { return world_ranks_.size(); }
  Member& member(std::size_t index) { return members_[index]; }

  std::atomic<std::uint64_t>& state() { return state_; }
  // Phases finished by all members together, ever. Every member runs the same phases, so
  // after each one the count is a multiple of the size: waiters poll one word, and only the
  // member that completes a phase wakes the sleepers (not every member: with n sleepers that
  // would be n^2 wake-ups per phase).
  std::atomic<std::uint64_t>& phase_arrivals() { return phase_arrivals_; }

  // Sleeping waiters: a member that changes the channel wakes them (cheap when there are
  // none); the world wakes them when a rank fails or finishes.
  void wake();
  // Sleeps until woken or `for_at_most` passes, unless `ready` already holds.
  template <typename Ready>
  void sleep(const Ready& ready, std::chrono::microseconds for_at_most) {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    {
      std::unique_lock lock(mutex_);
      if (!ready()) woken_.wait_for(lock, for_at_most);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }

 private:
  std::vector<Rank> world_ranks_;
  std::unique_ptr<Member[]> members_;
  alignas(64) std::atomic<std::uint64_t> state_{0};
  alignas(64) std::atomic<std::uint64_t> phase_arrivals_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable woken_;
};

// Every member's call of one round, read in place: a member overwrites its call of a round
// only two rounds later, which it reaches only once every member has finished this one.
class CallView {
 public:
  CallView(GroupChannel& channel, std::size_t parity) : channel_(&channel), parity_(parity) {}
  [[nodiscard]] std::size_t size() const { return channel_->size(); }
  const CollectiveCall& operator[](std::size_t i) const {
    return channel_->member(i).published[parity_].call;
  }

  class Iterator {
   public:
    Iterator(const CallView& view, std::size_t index) : view_(&view), index_(index) {}
    const CollectiveCall& operator*() const { return (*view_)[index_]; }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    bool operator!=(const Iterator& other) const { return index_ != other.index_; }

   private:
    const CallView* view_;
    std::size_t index_;
  };
  [[nodiscard]] Iterator begin() const { return {*this, 0}; }
  [[nodiscard]] Iterator end() const { return {*this, size()}; }

 private:
  GroupChannel* channel_;
  std::size_t parity_;
};

// A reference to the work of each phase, without a std::function (and its allocation) per
// call. Valid while the callable it was made from lives.
class PhaseWork {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, PhaseWork>)
      PhaseWork(F&& work)  // NOLINT(google-explicit-constructor): built at every call site
      : object_(static_cast<const void*>(&work)),
        run_([](const void* object, const CallView& calls, int member, int phase) {
          (*static_cast<std::remove_reference_t<F>*>(const_cast<void*>(object)))(calls, member,
                                                                                 phase);
        }) {}

  void operator()(const CallView& calls, int member, int phase) const {
    run_(object_, calls, member, phase);
  }

 private:
  const void* object_;
  void (*run_)(const void*, const CallView&, int, int);
};

}  // namespace shardwise::detail

#pragma once
// The state the threads of the local backend share: rendezvous rounds for collectives, mailboxes
// for point-to-point messages, and the failure of any rank.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise::detail {

// One member's part in a collective: what it called and its buffers.
struct CollectiveCall {
  CollectiveCall(std::string_view op_name, std::size_t element_count, DType element_type,
                 Rank root_rank, const void* input, void* output)
      : op(op_name), count(element_count), dtype(element_type), root(root_rank), in(input),
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

class LocalWorld {
 public:
  using Clock = std::chrono::steady_clock;
  // Runs phase `phase` of a collective for member `member`, given every member's call.
  using Work = std::function<void(const std::vector<CollectiveCall>& calls, int member, int phase)>;

  explicit LocalWorld(int size) : size_(size) {}
  [[nodiscard]] int size() const { return size_; }

  // The `sequence`-th collective of `group`: publishes this member's call, waits for every
  // member, then runs each phase with a barrier after it. Until every member has arrived, a
  // timeout, a failed or finished rank, or calls that do not match make the members that are
  // there fail at once (each withdraws its call, so no one reads its buffers later). Once all
  // have arrived, no member returns before every member has finished every phase, since
  // peers read each other's buffers; a failure elsewhere, a phase that threw, or a deadline
  // passed meanwhile is reported after that.
  // `group` holds world ranks; `context` tells communicators over the same ranks apart.
  void collective(std::uint64_t context, const Group& group, int member, std::uint64_t sequence,
                  const CollectiveCall& call, int phases, std::chrono::milliseconds timeout,
                  const Work& work);

  // Buffered point-to-point between world ranks, apart per communicator (`context`): post
  // never waits; take waits for the message.
  void post(std::uint64_t context, Rank from, Rank to, int tag, std::vector<std::byte> data);
  std::vector<std::byte> take(std::uint64_t context, Rank from, Rank to, int tag,
                              std::size_t bytes, std::chrono::milliseconds timeout);

  // Records that a rank failed (its message) or finished; wakes every waiting rank.
  void fail(Rank rank, const std::string& message);
  // Records that a rank aborted the world; every waiting and later operation fails.
  void abort(Rank rank, const std::string& reason);
  void finish(Rank rank);
  // The first failure, "rank R failed: message", if any.
  [[nodiscard]] std::optional<std::string> failure() const;

 private:
  struct Round {
    std::vector<std::optional<CollectiveCall>> calls;
    int arrived = 0;
    std::vector<int> done;  // per phase: members past it
    int left = 0;           // members that have returned or thrown
    // Why the round cannot complete (a member gave up or disagreed); set before all arrive.
    std::optional<std::string> abandoned;
  };
  using RoundKey = std::tuple<std::uint64_t, std::vector<Rank>, std::uint64_t>;

  // Names the operation waited for, in errors only.
  using Describe = std::function<std::string()>;

  // Waits under `lock` until `ready`; throws CommError when a rank fails, when `missing`
  // members have all finished, or at the deadline. `describe` names the operation.
  void wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
            const std::function<bool()>& ready, const std::function<std::vector<Rank>()>& missing,
            const Describe& describe, std::chrono::milliseconds timeout);

  // Waits under `lock` until `ready`, whatever else happens: for members that read each
  // other's buffers, which always finish.
  void wait_unconditionally(std::unique_lock<std::mutex>& lock,
                            const std::function<bool()>& ready);

  // Polls (with `lock` released) until a change is announced or the spin budget is spent;
  // true when the caller should look at the state again rather than sleep.
  bool spin_for_change(std::unique_lock<std::mutex>& lock, Clock::time_point spin_until);

  // Counts a member out of a round, erasing the round when every member has left.
  void leave(const RoundKey& key, Round& round, std::size_t members);

  // Wakes every waiter; called with mutex_ held after any change to the shared state.
  void announce();

  // How long a waiter polls for a change before it sleeps on the condition variable.
  static constexpr std::chrono::microseconds kSpin{200};
  // Pause instructions spun before the first yield (a few microseconds).
  static constexpr int kPauseSpins = 2000;

  int size_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // Counts the changes announced, so that spinning waiters see one without the mutex.
  std::atomic<std::uint64_t> changes_{0};
  std::map<RoundKey, Round> rounds_;
  std::map<std::tuple<std::uint64_t, Rank, Rank, int>, std::deque<std::vector<std::byte>>>
      mailboxes_;
  std::optional<std::string> failure_;
  std::set<Rank> finished_;
};

}  // namespace shardwise::detail

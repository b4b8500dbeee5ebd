#pragma once
// The state the threads of the local backend share: a channel per group for collectives,
// mailboxes for point-to-point messages, and the failure of any rank.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "group_channel.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::detail {

// "2, 3", for errors.
std::string rank_list(const std::vector<Rank>& ranks);

class LocalWorld {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LocalWorld(int size);
  [[nodiscard]] int size() const { return size_; }

  // The channel of the group `world_ranks` of communicator `context`, made on first use. It
  // lives as long as the world.
  GroupChannel& channel(std::uint64_t context, const std::vector<Rank>& world_ranks);

  // The next collective of `channel`: publishes this member's call, waits for every member,
  // then runs each phase with a barrier after it. Until every member has arrived, a timeout,
  // a failed or finished rank, or calls that do not match make the members that are there
  // fail at once and break the channel, so that no one reads their buffers later. Once all
  // have arrived, no member returns before every member has finished every phase, since
  // peers read each other's buffers; a failure elsewhere, a phase that threw, or a deadline
  // passed meanwhile is reported after that. `group` (this communicator's ranks) and its
  // axes name the collective in errors.
  //
  // An eager collective (`eager_bytes` set) copies the first `*eager_bytes` bytes of
  // call.in into the channel first, peers read them there, and it runs one phase with no
  // barrier after it: a member may return while peers still read, since what they read is the
  // channel's. A member overwrites its staged copy two rounds later, once every member has
  // finished this one. It saves the last rendezvous, which is most of a small collective.
  void collective(GroupChannel& channel, const Group& group, int member, const CollectiveCall& call,
                  int phases, std::chrono::milliseconds timeout, PhaseWork work,
                  std::optional<std::size_t> eager_bytes = std::nullopt);

  // Buffered point-to-point between world ranks, apart per communicator (`context`): post
  // never waits; take waits for the message.
  void post(std::uint64_t context, Rank from, Rank to, int tag, std::vector<std::byte> data);
  std::vector<std::byte> take(std::uint64_t context, Rank from, Rank to, int tag, std::size_t bytes,
                              std::chrono::milliseconds timeout);

  // Records that a rank failed (its message) or finished; wakes every waiting rank.
  void fail(Rank rank, std::string_view message);
  // Records that a rank aborted the world; every waiting and later operation fails.
  void abort(Rank rank, std::string_view reason);
  void finish(Rank rank);
  // The first failure, "rank R failed: message", if any.
  [[nodiscard]] std::optional<std::string> failure() const;

 private:
  // Names the operation waited for, in errors only.
  using Describe = std::function<std::string()>;

  // Waits under `lock` until `ready`; throws CommError when a rank fails, when `missing`
  // members have all finished, or at the deadline. `describe` names the operation.
  void wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
            const std::function<bool()>& ready, const std::function<std::vector<Rank>()>& missing,
            const Describe& describe, std::chrono::milliseconds timeout);

  // Polls (with `lock` released) until a change is announced or the spin budget is spent;
  // true when the caller should look at the state again rather than sleep.
  bool spin_for_change(std::unique_lock<std::mutex>& lock, Clock::time_point spin_until);

  // One member's part in one round of a channel (channel_round.cpp).
  struct Round;
  // Publishes the member's call and arrives; the last to arrive checks the calls and completes
  // the round or breaks it. Returns whether this member was the last.
  bool arrive(Round& r);
  // Waits for the others; returns whether the round is still to be confirmed (an eager round
  // whose members all joined before the last one's compare-and-swap).
  bool wait_for_peers(Round& r);
  // Waits until the state has left the round; throws if it broke.
  void confirm(Round& r);
  void run_eager(Round& r, bool unconfirmed, PhaseWork work);
  void run_phases(Round& r, int phases, PhaseWork work);
  // Why a member waiting for peers should give up (a failed rank, absent members that have
  // all finished, the deadline), or nullopt.
  std::optional<std::string> reason_to_give_up(const Round& r);
  // Breaks the round with `reason` unless it completed meanwhile; returns whether it is broken.
  bool break_round(Round& r, const std::string& reason);
  // The error of a round broken by another member, or of the world's failure.
  CommError broken_error(const Round& r) const;
  CommError aborted_error(const Round& r) const;

  // Spins, then yields, then sleeps on `channel` until `ready()`; between looks it asks
  // `give_up()` (nullopt: go on). Returns nullopt once ready, else the reason to give up.
  // CanGiveUp: whether give_up() can say yes (then the world's failure also wakes a sleeper).
  template <bool CanGiveUp, typename Ready, typename GiveUp>
  std::optional<std::string> await(GroupChannel& channel, const Ready& ready,
                                   const GiveUp& give_up);
  // Wakes the sleepers of every channel (a rank failed or finished).
  void wake_channels();

  // Wakes every waiter; called with mutex_ held after any change to the shared state.
  void announce();

  // How long a waiter polls for a change before it sleeps on the condition variable.
  static constexpr std::chrono::microseconds kSpin{200};
  // How long a waiter in a channel spins on pause instructions before it yields, unless the
  // ranks outnumber the cores (then the rank it waits for may need its core).
  static constexpr std::chrono::microseconds kPauseSpin{5};
  // How long a waiter in a channel first sleeps before it looks again (for deadlines), and the
  // most it sleeps at once as the slices double.
  static constexpr std::chrono::microseconds kSleepSlice{2000};
  static constexpr std::chrono::microseconds kLongestSleepSlice{64000};
  // Pause instructions spun before the first yield (a few microseconds).
  static constexpr int kPauseSpins = 2000;

  int size_;
  bool oversubscribed_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // Counts the changes announced, so that spinning waiters see one without the mutex.
  std::atomic<std::uint64_t> changes_{0};
  std::map<std::pair<std::uint64_t, std::vector<Rank>>, std::unique_ptr<GroupChannel>> channels_;
  // Set with failure_, read without the mutex by waiters in channels.
  std::atomic<bool> failed_{false};
  std::unique_ptr<std::atomic<bool>[]> rank_finished_;
  // How many ranks have finished: while none has, a waiter need not look at its peers (a scan
  // per wake-up is quadratic in the group's size).
  std::atomic<int> finished_count_{0};
  std::map<std::tuple<std::uint64_t, Rank, Rank, int>, std::deque<std::vector<std::byte>>>
      mailboxes_;
  std::optional<std::string> failure_;
  std::set<Rank> finished_;
};

}  // namespace shardwise::detail

// One member's part in one round of a group channel: arriving, waiting for the peers, and
// running the work, eagerly or in phases with barriers. The invariant that keeps members from
// reading what a peer reuses: a member leaves round r only once the channel's state has left it
// (completed or broken), so a member two rounds ahead of a peer is impossible.
#include <cstring>
#include <thread>

#include "local_world.hpp"

namespace shardwise::detail {
namespace {

void pause_once() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

using State = GroupChannel::State;

}  // namespace

struct LocalWorld::Round {
  GroupChannel& channel;
  const Group& group;
  int member;
  std::size_t self;
  const CollectiveCall& call;
  Clock::time_point deadline;
  std::chrono::milliseconds timeout;
  std::optional<std::size_t> eager_bytes;
  std::uint64_t round = 0;
  std::size_t parity = 0;

  [[nodiscard]] std::size_t size() const { return channel.size(); }
  [[nodiscard]] GroupChannel::Member& me() const { return channel.member(self); }
  [[nodiscard]] State state() const { return State::unpack(channel.state().load()); }
  [[nodiscard]] bool joined(std::size_t i) const {
    return channel.member(i).published[parity].joined.load(std::memory_order_acquire) == round + 1;
  }
  [[nodiscard]] bool left_round() const {
    const State s = state();
    return s.round != round || s.broken;
  }
  // Built only for an error: a small collective takes microseconds.
  [[nodiscard]] std::string describe() const {
    return std::string(call.op) + " over " + Group(channel.world_ranks(), group.axes()).to_string();
  }
};

template <bool CanGiveUp, typename Ready, typename GiveUp>
std::optional<std::string> LocalWorld::await(GroupChannel& channel, const Ready& ready,
                                             const GiveUp& give_up) {
  // A collective's members usually arrive within microseconds of each other, far sooner than
  // a sleeping thread wakes: spin first, then yield (so that oversubscribed ranks still run),
  // then sleep. A yield is a system call and costs as much as a peer's change takes to arrive
  // with a core per rank, hence the pause spins before it.
  if (!oversubscribed_) {
    const auto pause_until = Clock::now() + kPauseSpin;
    for (unsigned i = 1; !ready(); ++i) {
      pause_once();
      if (i % 64 == 0 && Clock::now() >= pause_until) break;
    }
  }
  const auto spin_until = Clock::now() + kSpin;
  // A sleeper that can give up also wakes for the world's failure, which give_up() reports; one
  // that waits whatever happens (a phase barrier) does not spin on it.
  const auto ready_or_failed = [&] { return ready() || (CanGiveUp && failed_.load()); };
  // Every change a waiter waits for wakes it; the slices only bound how late it notices a
  // deadline. They grow, so that thousands of ranks waiting on two cores do not spend them
  // waking each other to look.
  auto slice = kSleepSlice;
  while (!ready()) {
    if (auto reason = give_up()) return reason;
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
    } else {
      channel.sleep(ready_or_failed, slice);
      slice = std::min(slice * 2, kLongestSleepSlice);
    }
  }
  return std::nullopt;
}

CommError LocalWorld::broken_error(const Round& r) const {
  const State s = r.state();
  return CommError(r.describe() + ": " +
                   r.channel.member(static_cast<std::size_t>(s.breaker)).breaking_reason);
}

CommError LocalWorld::aborted_error(const Round& r) const {
  std::lock_guard lock(mutex_);
  return CommError(r.describe() + " aborted: " + failure_.value_or("a rank failed"));
}

bool LocalWorld::break_round(Round& r, const std::string& reason) {
  r.me().breaking_reason = reason;
  std::uint64_t word = r.channel.state().load();
  while (true) {
    const State s = State::unpack(word);
    if (s.broken) return true;
    if (s.round != r.round) return false;  // every member arrived: it completed
    if (r.channel.state().compare_exchange_weak(word,
                                                State{true, r.member, r.round, s.arrived}.pack())) {
      r.channel.wake();
      return true;
    }
  }
}

bool LocalWorld::arrive(Round& r) {
  // A broken channel fails before the member touches its slot: a peer may still be reading
  // what the slot held in the round that broke.
  {
    const State s = r.state();
    if (s.broken) throw broken_error(r);
    if (s.round != r.round) {
      // Members leave a round only once the state has left it; this would be a bug. Break
      // the channel rather than let members fall out of step.
      const std::string reason = "rank " + std::to_string(r.channel.world_ranks()[r.self]) +
                                 " found the channel at round " + std::to_string(s.round) +
                                 " where it was at round " + std::to_string(r.round);
      (void)break_round(r, reason);
      throw CommError(r.describe() + ": " + reason);
    }
  }
  GroupChannel::Member& me = r.me();
  GroupChannel::Published& mine = me.published[r.parity];
  mine.call = r.call;
  if (r.eager_bytes) {
    std::vector<std::byte>& staged = me.staged[r.parity];
    if (staged.size() < *r.eager_bytes) staged.resize(*r.eager_bytes);
    if (*r.eager_bytes > 0) std::memcpy(staged.data(), r.call.in, *r.eager_bytes);
    mine.call.in = staged.data();
  }
  // The round counts as this member's only once its slot is written (a throw above leaves
  // the member at this round, and its next call finds the round broken by those who waited).
  me.next_round = (r.round + 1) & GroupChannel::kRoundMask;
  mine.joined.store(r.round + 1, std::memory_order_release);

  const std::vector<Rank>& ranks = r.channel.world_ranks();
  const std::size_t n = r.size();
  std::uint64_t word = r.channel.state().load();
  while (true) {
    const State s = State::unpack(word);
    if (s.broken) throw broken_error(r);
    State next = s;
    const bool last = static_cast<std::size_t>(s.arrived) + 1 == n;
    if (!last) {
      ++next.arrived;
    } else {
      next = State{false, 0, r.round + 1, 0};
      for (std::size_t i = 0; i < n; ++i) {
        const CollectiveCall& other = r.channel.member(i).published[r.parity].call;
        if (i == r.self || calls_match(other, r.call)) continue;
        me.breaking_reason = "rank " + std::to_string(ranks[r.self]) + " called " +
                             call_text(r.call) + " where rank " + std::to_string(ranks[i]) +
                             " called " + call_text(other);
        next = State{true, r.member, r.round, s.arrived};
        break;
      }
    }
    if (r.channel.state().compare_exchange_weak(word, next.pack())) {
      // Sleepers wait for the round to complete or break, not for each arrival.
      if (last || next.broken) r.channel.wake();
      if (next.broken) throw CommError(r.describe() + ": " + me.breaking_reason);
      return last;
    }
  }
}

std::optional<std::string> LocalWorld::reason_to_give_up(const Round& r) {
  if (failed_.load()) return aborted_error(r).what();
  const bool past_deadline = Clock::now() >= r.deadline;
  if (finished_count_.load() == 0 && !past_deadline) return std::nullopt;
  const std::vector<Rank>& ranks = r.channel.world_ranks();
  std::vector<Rank> absent;
  bool all_finished = true;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r.joined(i)) continue;
    absent.push_back(ranks[i]);
    all_finished = all_finished && rank_finished_[static_cast<std::size_t>(ranks[i])].load();
  }
  if (!absent.empty() && all_finished) {
    return r.describe() + " cannot complete: rank" + (absent.size() > 1 ? "s " : " ") +
           rank_list(absent) + " finished without joining it";
  }
  if (!past_deadline) return std::nullopt;
  return r.describe() + ": " +
         (absent.empty()
              ? std::string("other members")
              : std::string(absent.size() > 1 ? "ranks " : "rank ") + rank_list(absent)) +
         " did not arrive within " + std::to_string(r.timeout.count()) + " ms";
}

bool LocalWorld::wait_for_peers(Round& r) {
  // An eager round's members need not wait for the last arrival's compare-and-swap to read
  // what peers staged: every peer's flag is enough, one cache-line trip sooner.
  const auto ready = [&] {
    if (r.left_round()) return true;
    if (!r.eager_bytes) return false;
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (!r.joined(i)) return false;
    }
    return true;
  };
  if (const auto reason = await<true>(r.channel, ready, [&] { return reason_to_give_up(r); })) {
    // Break the round unless it completed meanwhile, so that members arriving later fail
    // instead of reading buffers this member is about to free.
    const std::string why = "rank " + std::to_string(r.channel.world_ranks()[r.self]) +
                            " stopped waiting for it: " + *reason;
    if (break_round(r, why)) throw CommError(*reason);
  }
  // One look decides both: broken, or still to be confirmed.
  const State s = r.state();
  if (s.broken && s.round == r.round) throw broken_error(r);
  return !s.broken && s.round == r.round;
}

void LocalWorld::confirm(Round& r) {
  // Every member has joined, so the last one's compare-and-swap is under way; a member that
  // gives up meanwhile breaks the round (what peers read is the channel's, so nothing is
  // freed under them).
  if (const auto reason = await<true>(
          r.channel, [&] { return r.left_round(); }, [&] { return reason_to_give_up(r); })) {
    const std::string why = "rank " + std::to_string(r.channel.world_ranks()[r.self]) +
                            " stopped waiting for it: " + *reason;
    if (break_round(r, why)) throw CommError(*reason);
  }
  const State s = r.state();
  if (s.broken && s.round == r.round) throw broken_error(r);
}

void LocalWorld::run_eager(Round& r, bool unconfirmed, PhaseWork work) {
  // What peers read is staged in the channel: no barrier after the work. Where the round is
  // still to be confirmed, the state's line is fetched while the work reads the peers', and the
  // calls are compared here (the last member compares them too, and breaks the round if they
  // differ).
  const CallView calls(r.channel, r.parity);
  bool match = true;
  if (unconfirmed) {
    __builtin_prefetch(&r.channel.state());
    for (std::size_t i = 0; i < r.size() && match; ++i) match = calls_match(calls[i], r.call);
  }
  std::exception_ptr own_error;
  if (match) {
    try {
      work(calls, r.member, 0);
    } catch (...) {
      own_error = std::current_exception();
    }
  }
  if (unconfirmed) confirm(r);
  if (own_error) std::rethrow_exception(own_error);
  if (failed_.load()) throw aborted_error(r);
}

void LocalWorld::run_phases(Round& r, int phases, PhaseWork work) {
  // Peers read each other's buffers: no member leaves before all have finished each phase.
  const CallView calls(r.channel, r.parity);
  GroupChannel::Member& me = r.me();
  const std::size_t n = r.size();
  std::exception_ptr own_error;
  bool past_deadline = false;
  for (int phase = 0; phase < phases; ++phase) {
    if (!own_error) {
      try {
        work(calls, r.member, phase);
      } catch (...) {
        own_error = std::current_exception();
        // Said before the barrier, so that every peer learns that this part is missing.
        me.failed_in.store(r.round + 1);
      }
    }
    const std::uint64_t everyone = ++me.phases * n;
    if (r.channel.phase_arrivals().fetch_add(1) + 1 == everyone) r.channel.wake();
    const auto everyone_done = [&] { return r.channel.phase_arrivals().load() >= everyone; };
    (void)await<false>(r.channel, everyone_done, [] { return std::optional<std::string>(); });
    past_deadline = past_deadline || Clock::now() > r.deadline;
  }
  if (own_error) std::rethrow_exception(own_error);
  // A peer whose part threw left its share of the result unwritten: no member returns it.
  for (std::size_t i = 0; i < n && phases > 0; ++i) {
    if (i != r.self && r.channel.member(i).failed_in.load() == r.round + 1) {
      throw CommError(r.describe() + ": rank " + std::to_string(r.channel.world_ranks()[i]) +
                      "'s part failed, so the result is incomplete");
    }
  }
  if (failed_.load()) throw aborted_error(r);
  if (past_deadline) {
    throw CommError(r.describe() + ": the members did not finish within " +
                    std::to_string(r.timeout.count()) +
                    " ms (every member had arrived, and all finished reading each other's "
                    "buffers before this error)");
  }
}

void LocalWorld::collective(GroupChannel& channel, const Group& group, int member,
                            const CollectiveCall& call, int phases,
                            std::chrono::milliseconds timeout, PhaseWork work,
                            std::optional<std::size_t> eager_bytes) {
  Round r{
      channel, group,      member, static_cast<std::size_t>(member), call, Clock::now() + timeout,
      timeout, eager_bytes};
  r.round = r.me().next_round;
  r.parity = r.round & 1;
  const bool last = arrive(r);
  const bool unconfirmed = !last && wait_for_peers(r);
  if (eager_bytes) return run_eager(r, unconfirmed, work);
  run_phases(r, phases, work);
}

}  // namespace shardwise::detail

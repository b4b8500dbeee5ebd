#include "local_world.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {
namespace {

std::string rank_list(const std::vector<Rank>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

void pause_once() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

LocalWorld::LocalWorld(int size)
    : size_(size),
      oversubscribed_(static_cast<unsigned>(size) > std::max(1U, std::thread::hardware_concurrency())),
      rank_finished_(std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size))) {}

GroupChannel& LocalWorld::channel(std::uint64_t context, const std::vector<Rank>& world_ranks) {
  std::lock_guard lock(mutex_);
  auto& slot = channels_[{context, world_ranks}];
  if (!slot) slot = std::make_unique<GroupChannel>(world_ranks);
  return *slot;
}

void LocalWorld::wake_channels() {
  for (auto& [key, channel] : channels_) channel->wake();
}

template <typename Ready, typename GiveUp>
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
  while (!ready()) {
    if (auto reason = give_up()) return reason;
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
    } else {
      channel.sleep(ready, kSleepSlice);
    }
  }
  return std::nullopt;
}

void LocalWorld::announce() {
  changes_.fetch_add(1, std::memory_order_release);
  changed_.notify_all();
}

void LocalWorld::wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                      const std::function<bool()>& ready,
                      const std::function<std::vector<Rank>()>& missing, const Describe& describe,
                      std::chrono::milliseconds timeout) {
  const auto spin_until = Clock::now() + kSpin;
  while (!ready()) {
    if (failure_) throw CommError(describe() + " aborted: " + *failure_);
    if (!finished_.empty()) {
      const std::vector<Rank> absent = missing();
      bool all_finished = !absent.empty();
      for (Rank r : absent) all_finished = all_finished && finished_.count(r) > 0;
      if (all_finished) {
        throw CommError(describe() + " cannot complete: rank" + (absent.size() > 1 ? "s " : " ") +
                        rank_list(absent) + " finished without joining it");
      }
    }
    if (spin_for_change(lock, spin_until)) continue;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
      const std::vector<Rank> late = missing();
      throw CommError(describe() + ": " +
                      (late.empty()
                           ? std::string("other members")
                           : std::string(late.size() > 1 ? "ranks " : "rank ") + rank_list(late)) +
                      " did not arrive within " + std::to_string(timeout.count()) + " ms");
    }
  }
}

bool LocalWorld::spin_for_change(std::unique_lock<std::mutex>& lock,
                                 Clock::time_point spin_until) {
  // Spin first (yielding, so that oversubscribed ranks still run): a collective's members
  // usually arrive within microseconds of each other, far sooner than a sleeping thread
  // wakes. The spin has one budget per wait, so that ranks waiting long on a busy machine
  // sleep instead of taking turns from the ranks they wait for.
  if (Clock::now() >= spin_until) return false;
  const std::uint64_t seen = changes_.load(std::memory_order_acquire);
  lock.unlock();
  // A few microseconds of pure spinning first: with a core per rank the peer's change arrives
  // within them, and a yield (a system call) costs as much as the change takes to arrive.
  for (int i = 0; i < kPauseSpins && changes_.load(std::memory_order_acquire) == seen; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  while (changes_.load(std::memory_order_acquire) == seen && Clock::now() < spin_until) {
    std::this_thread::yield();
  }
  lock.lock();
  // Past the budget with nothing seen, the caller sleeps; otherwise it looks again.
  return changes_.load(std::memory_order_acquire) != seen || Clock::now() < spin_until;
}

void LocalWorld::collective(GroupChannel& channel, const Group& group, int member,
                            const CollectiveCall& call, int phases,
                            std::chrono::milliseconds timeout, PhaseWork work,
                            std::optional<std::size_t> eager_bytes) {
  using State = GroupChannel::State;
  const auto deadline = Clock::now() + timeout;
  const std::vector<Rank>& ranks = channel.world_ranks();
  // Built only for an error: a small collective takes microseconds.
  const auto describe = [&] {
    return std::string(call.op) + " over " + Group{ranks, group.axes}.to_string();
  };
  const std::size_t n = channel.size();
  const auto self = static_cast<std::size_t>(member);
  GroupChannel::Member& me = channel.member(self);
  const std::uint64_t round = me.next_round++ & GroupChannel::kRoundMask;
  const std::size_t parity = round & 1;
  GroupChannel::Published& mine = me.published[parity];
  mine.call = call;
  if (eager_bytes) {
    std::vector<std::byte>& staged = me.staged[parity];
    if (staged.size() < *eager_bytes) staged.resize(*eager_bytes);
    if (*eager_bytes > 0) std::memcpy(staged.data(), call.in, *eager_bytes);
    mine.call.in = staged.data();
  }
  mine.joined.store(round + 1, std::memory_order_release);
  const auto broken_round = [&](const State& state) {
    return CommError(describe() + ": " +
                     channel.member(static_cast<std::size_t>(state.breaker)).breaking_reason);
  };

  // Arrive; the last to arrive checks the calls and completes the round, or breaks it.
  std::uint64_t word = channel.state().load();
  bool all_arrived = false;
  while (true) {
    const State state = State::unpack(word);
    if (state.broken) throw broken_round(state);
    if (state.round != round) {
      // Members leave a round only once the state has left it; this would be a bug.
      throw CommError(describe() + ": the channel is at round " + std::to_string(state.round) +
                      " where this member is at round " + std::to_string(round));
    }
    State next = state;
    all_arrived = static_cast<std::size_t>(state.arrived) + 1 == n;
    if (!all_arrived) {
      ++next.arrived;
    } else {
      next = State{false, 0, round + 1, 0};
      for (std::size_t i = 0; i < n; ++i) {
        const CollectiveCall& other = channel.member(i).published[parity].call;
        if (i == self || calls_match(other, call)) continue;
        me.breaking_reason = "rank " + std::to_string(ranks[self]) + " called " +
                             call_text(call) + " where rank " + std::to_string(ranks[i]) +
                             " called " + call_text(other);
        next = State{true, member, round, state.arrived};
        break;
      }
    }
    if (channel.state().compare_exchange_weak(word, next.pack())) {
      channel.wake();
      if (next.broken) throw CommError(describe() + ": " + me.breaking_reason);
      break;
    }
  }

  const auto joined = [&](std::size_t i) {
    return channel.member(i).published[parity].joined.load(std::memory_order_acquire) == round + 1;
  };
  const auto state_left_round = [&] {
    const State state = State::unpack(channel.state().load());
    return state.round != round || state.broken;
  };
  // An eager round's members need not wait for the last arrival's compare-and-swap to read
  // what peers staged: every peer's flag is enough, one cache-line trip sooner. They confirm
  // the round before returning.
  bool confirm = false;
  if (!all_arrived) {
    const auto finished = [&] {
      if (state_left_round()) return true;
      if (!eager_bytes) return false;
      for (std::size_t i = 0; i < n; ++i) {
        if (!joined(i)) return false;
      }
      return true;
    };
    const auto give_up = [&]() -> std::optional<std::string> {
      if (failed_.load()) {
        std::lock_guard lock(mutex_);
        return describe() + " aborted: " + *failure_;
      }
      std::vector<Rank> absent;
      bool all_finished = true;
      for (std::size_t i = 0; i < n; ++i) {
        if (joined(i)) continue;
        absent.push_back(ranks[i]);
        all_finished = all_finished && rank_finished_[static_cast<std::size_t>(ranks[i])].load();
      }
      if (!absent.empty() && all_finished) {
        return describe() + " cannot complete: rank" + (absent.size() > 1 ? "s " : " ") +
               rank_list(absent) + " finished without joining it";
      }
      if (Clock::now() < deadline) return std::nullopt;
      return describe() + ": " +
             (absent.empty() ? std::string("other members")
                             : std::string(absent.size() > 1 ? "ranks " : "rank ") +
                                   rank_list(absent)) +
             " did not arrive within " + std::to_string(timeout.count()) + " ms";
    };
    if (const auto reason = await(channel, finished, give_up)) {
      // Break the round unless it completed meanwhile, so that members arriving later fail
      // instead of reading buffers this member is about to free.
      me.breaking_reason = "rank " + std::to_string(ranks[self]) + " stopped waiting for it: " +
                           *reason;
      word = channel.state().load();
      while (true) {
        const State state = State::unpack(word);
        if (state.round != round) break;  // every member arrived: take part after all
        if (state.broken) throw CommError(*reason);
        if (channel.state().compare_exchange_weak(
                word, State{true, member, round, state.arrived}.pack())) {
          channel.wake();
          throw CommError(*reason);
        }
      }
    }
    const State state = State::unpack(channel.state().load());
    if (state.broken && state.round == round) throw broken_round(state);
    confirm = !state_left_round();
  }

  // Every member arrived: run the phases. No member leaves before all have finished each.
  const CallView calls(channel, parity);
  std::exception_ptr own_error;
  bool past_deadline = false;
  if (eager_bytes) {
    // What peers read is staged in the channel: no barrier after the work. Where the round is
    // still to be confirmed, the state's line is fetched while the work reads the peers'.
    bool match = true;
    if (confirm) {
      __builtin_prefetch(&channel.state());
      for (std::size_t i = 0; i < n && match; ++i) match = calls_match(calls[i], call);
    }
    if (match) work(calls, member, 0);
    if (confirm) {
      // Every member has joined, so the last one's compare-and-swap is under way.
      (void)await(channel, state_left_round, [] { return std::optional<std::string>(); });
      const State state = State::unpack(channel.state().load());
      if (state.broken && state.round == round) throw broken_round(state);
    }
    if (failed_.load()) {
      std::lock_guard lock(mutex_);
      throw CommError(describe() + " aborted: " + *failure_);
    }
    return;
  }
  for (int phase = 0; phase < phases; ++phase) {
    if (!own_error) {
      try {
        work(calls, member, phase);
      } catch (...) {
        own_error = std::current_exception();
      }
    }
    const std::uint64_t target = ++me.phases;
    me.phases_done.store(target);
    channel.wake();
    const auto everyone_done = [&] {
      for (std::size_t i = 0; i < n; ++i) {
        if (channel.member(i).phases_done.load() < target) return false;
      }
      return true;
    };
    (void)await(channel, everyone_done, [] { return std::optional<std::string>(); });
    past_deadline = past_deadline || Clock::now() > deadline;
  }
  if (own_error) std::rethrow_exception(own_error);
  if (failed_.load()) {
    std::lock_guard lock(mutex_);
    throw CommError(describe() + " aborted: " + *failure_);
  }
  if (past_deadline) {
    throw CommError(describe() + ": the members did not finish within " +
                    std::to_string(timeout.count()) +
                    " ms (every member had arrived, and all finished reading each other's "
                    "buffers before this error)");
  }
}

void LocalWorld::post(std::uint64_t context, Rank from, Rank to, int tag,
                      std::vector<std::byte> data) {
  std::unique_lock lock(mutex_);
  mailboxes_[{context, from, to, tag}].push_back(std::move(data));
  announce();
}

std::vector<std::byte> LocalWorld::take(std::uint64_t context, Rank from, Rank to, int tag,
                                        std::size_t bytes, std::chrono::milliseconds timeout) {
  const auto describe = [&] {
    return "recv by rank " + std::to_string(to) + " from rank " + std::to_string(from) + " (tag " +
           std::to_string(tag) + ")";
  };
  std::unique_lock lock(mutex_);
  auto& box = mailboxes_[{context, from, to, tag}];
  wait(
      lock, Clock::now() + timeout, [&] { return !box.empty(); },
      [&] { return std::vector<Rank>{from}; }, describe, timeout);
  std::vector<std::byte> data = std::move(box.front());
  box.pop_front();
  if (data.size() != bytes) {
    throw CommError(describe() + ": expected " + std::to_string(bytes) + " bytes but rank " +
                    std::to_string(from) + " sent " + std::to_string(data.size()));
  }
  return data;
}

void LocalWorld::fail(Rank rank, const std::string& message) {
  std::unique_lock lock(mutex_);
  if (!failure_) failure_ = "rank " + std::to_string(rank) + " failed: " + message;
  failed_ = true;
  announce();
  wake_channels();
}

void LocalWorld::abort(Rank rank, const std::string& reason) {
  std::unique_lock lock(mutex_);
  if (!failure_) failure_ = "rank " + std::to_string(rank) + " aborted: " + reason;
  failed_ = true;
  announce();
  wake_channels();
}

void LocalWorld::finish(Rank rank) {
  std::unique_lock lock(mutex_);
  finished_.insert(rank);
  rank_finished_[static_cast<std::size_t>(rank)] = true;
  announce();
  wake_channels();
}

std::optional<std::string> LocalWorld::failure() const {
  std::unique_lock lock(mutex_);
  return failure_;
}

}  // namespace shardwise::detail

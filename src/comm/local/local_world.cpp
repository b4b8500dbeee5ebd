#include "local_world.hpp"

#include <thread>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {
namespace {

std::string rank_list(const std::vector<Rank>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string call_text(const CollectiveCall& call) {
  return std::string(call.op) + " of " + std::to_string(call.count) + " " + to_string(call.dtype) +
         (call.reduce_op ? " (" + to_string(*call.reduce_op) + ")" : "") +
         (call.root >= 0 ? " from root " + std::to_string(call.root) : "") +
         (call.agreement.empty() ? "" : " " + call.agreement);
}

bool matches(const CollectiveCall& a, const CollectiveCall& b) {
  return a.op == b.op && a.count == b.count && a.dtype == b.dtype && a.root == b.root &&
         a.reduce_op == b.reduce_op && a.agreement == b.agreement;
}

}  // namespace

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

void LocalWorld::wait_unconditionally(std::unique_lock<std::mutex>& lock,
                                      const std::function<bool()>& ready) {
  const auto spin_until = Clock::now() + kSpin;
  while (!ready()) {
    if (spin_for_change(lock, spin_until)) continue;
    changed_.wait(lock);
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

void LocalWorld::leave(const RoundKey& key, Round& round, std::size_t members) {
  if (++round.left == static_cast<int>(members)) rounds_.erase(key);
}

void LocalWorld::collective(std::uint64_t context, const Group& group, int member,
                            std::uint64_t sequence, const CollectiveCall& call, int phases,
                            std::chrono::milliseconds timeout, const Work& work) {
  const auto deadline = Clock::now() + timeout;
  // Built only for an error: a small collective takes microseconds.
  const auto describe = [&] { return std::string(call.op) + " over " + group.to_string(); };
  const RoundKey key{context, group.ranks, sequence};
  const auto n = static_cast<std::size_t>(group.size());
  const auto self = static_cast<std::size_t>(member);
  const Rank rank = group.ranks[self];
  std::vector<CollectiveCall> calls;
  {
    std::unique_lock lock(mutex_);
    Round& round = rounds_[key];
    if (round.calls.empty()) {
      round.calls.resize(n);
      round.done.assign(static_cast<std::size_t>(phases), 0);
    }
    if (round.abandoned) {
      const std::string reason = *round.abandoned;
      leave(key, round, n);
      throw CommError(describe() + ": " + reason);
    }
    for (std::size_t i = 0; i < n; ++i) {
      const auto& other = round.calls[i];
      if (!other || matches(*other, call)) continue;
      round.abandoned = "rank " + std::to_string(rank) + " called " + call_text(call) +
                        " where rank " + std::to_string(group.ranks[i]) + " called " +
                        call_text(*other);
      const std::string reason = *round.abandoned;
      leave(key, round, n);
      announce();
      throw CommError(describe() + ": " + reason);
    }
    round.calls[self] = call;
    ++round.arrived;
    announce();
    auto missing_arrivals = [&] {
      std::vector<Rank> absent;
      for (std::size_t i = 0; i < n; ++i) {
        if (!round.calls[i]) absent.push_back(group.ranks[i]);
      }
      return absent;
    };
    try {
      wait(
          lock, deadline,
          [&] { return round.arrived == static_cast<int>(n) || round.abandoned.has_value(); },
          missing_arrivals, describe, timeout);
      if (round.abandoned) throw CommError(describe() + ": " + *round.abandoned);
    } catch (const CommError& e) {
      // Withdraw the call, so that members arriving later fail instead of reading buffers
      // this member is about to free.
      round.calls[self].reset();
      --round.arrived;
      if (!round.abandoned) {
        round.abandoned = "rank " + std::to_string(rank) + " stopped waiting for it: " + e.what();
      }
      leave(key, round, n);
      announce();
      throw;
    }
    calls.reserve(n);
    for (const auto& c : round.calls) calls.push_back(*c);
  }
  std::exception_ptr own_error;
  bool past_deadline = false;
  for (int phase = 0; phase < phases; ++phase) {
    if (!own_error) {
      try {
        work(calls, member, phase);
      } catch (...) {
        own_error = std::current_exception();
      }
    }
    std::unique_lock lock(mutex_);
    Round& round = rounds_.at(key);
    ++round.done[static_cast<std::size_t>(phase)];
    announce();
    wait_unconditionally(lock, [&] {
      return round.done[static_cast<std::size_t>(phase)] == static_cast<int>(n);
    });
    past_deadline = past_deadline || Clock::now() > deadline;
  }
  std::unique_lock lock(mutex_);
  leave(key, rounds_.at(key), n);
  if (own_error) std::rethrow_exception(own_error);
  if (failure_) throw CommError(describe() + " aborted: " + *failure_);
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
  announce();
}

void LocalWorld::abort(Rank rank, const std::string& reason) {
  std::unique_lock lock(mutex_);
  if (!failure_) failure_ = "rank " + std::to_string(rank) + " aborted: " + reason;
  announce();
}

void LocalWorld::finish(Rank rank) {
  std::unique_lock lock(mutex_);
  finished_.insert(rank);
  announce();
}

std::optional<std::string> LocalWorld::failure() const {
  std::unique_lock lock(mutex_);
  return failure_;
}

}  // namespace shardwise::detail

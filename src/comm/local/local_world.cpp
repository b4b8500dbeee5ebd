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
         (call.root >= 0 ? " from root " + std::to_string(call.root) : "");
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
    // Spin first (yielding, so that oversubscribed ranks still run): a collective's members
    // usually arrive within microseconds of each other, far sooner than a sleeping thread
    // wakes. The spin has one budget per wait, so that ranks waiting long on a busy machine
    // sleep instead of taking turns from the ranks they wait for.
    if (Clock::now() < spin_until) {
      const std::uint64_t seen = changes_.load(std::memory_order_acquire);
      lock.unlock();
      while (changes_.load(std::memory_order_acquire) == seen && Clock::now() < spin_until) {
        std::this_thread::yield();
      }
      lock.lock();
      if (changes_.load(std::memory_order_acquire) != seen) continue;
    }
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

void LocalWorld::collective(const Group& group, int member, std::uint64_t sequence,
                            const CollectiveCall& call, int phases,
                            std::chrono::milliseconds timeout, const Work& work) {
  const auto deadline = Clock::now() + timeout;
  // Built only for an error: a small collective takes microseconds.
  const auto describe = [&] { return std::string(call.op) + " over " + group.to_string(); };
  const RoundKey key{group.ranks, sequence};
  const auto n = static_cast<std::size_t>(group.size());
  std::vector<CollectiveCall> calls;
  {
    std::unique_lock lock(mutex_);
    Round& round = rounds_[key];
    if (round.calls.empty()) {
      round.calls.resize(n);
      round.done.assign(static_cast<std::size_t>(phases), 0);
    }
    for (const auto& other : round.calls) {
      if (other && (other->op != call.op || other->count != call.count ||
                    other->dtype != call.dtype || other->root != call.root)) {
        throw CommError(describe() + ": rank " +
                        std::to_string(group.ranks[static_cast<std::size_t>(member)]) + " called " +
                        call_text(call) + " where another member called " + call_text(*other));
      }
    }
    round.calls[static_cast<std::size_t>(member)] = call;
    ++round.arrived;
    announce();
    auto missing_arrivals = [&] {
      std::vector<Rank> absent;
      for (std::size_t i = 0; i < n; ++i) {
        if (!round.calls[i]) absent.push_back(group.ranks[i]);
      }
      return absent;
    };
    wait(
        lock, deadline, [&] { return round.arrived == static_cast<int>(n); }, missing_arrivals,
        describe, timeout);
    calls.reserve(n);
    for (const auto& c : round.calls) calls.push_back(*c);
  }
  for (int phase = 0; phase < phases; ++phase) {
    work(calls, member, phase);
    std::unique_lock lock(mutex_);
    Round& round = rounds_.at(key);
    ++round.done[static_cast<std::size_t>(phase)];
    announce();
    // Members still working hold no lock; a failure elsewhere still wakes this one.
    wait(
        lock, deadline,
        [&] { return round.done[static_cast<std::size_t>(phase)] == static_cast<int>(n); },
        [] { return std::vector<Rank>{}; }, describe, timeout);
  }
  std::unique_lock lock(mutex_);
  if (++rounds_.at(key).left == static_cast<int>(n)) rounds_.erase(key);
}

void LocalWorld::post(Rank from, Rank to, int tag, std::vector<std::byte> data) {
  std::unique_lock lock(mutex_);
  mailboxes_[{from, to, tag}].push_back(std::move(data));
  announce();
}

std::vector<std::byte> LocalWorld::take(Rank from, Rank to, int tag, std::size_t bytes,
                                        std::chrono::milliseconds timeout) {
  const auto describe = [&] {
    return "recv by rank " + std::to_string(to) + " from rank " + std::to_string(from) + " (tag " +
           std::to_string(tag) + ")";
  };
  std::unique_lock lock(mutex_);
  auto& box = mailboxes_[{from, to, tag}];
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

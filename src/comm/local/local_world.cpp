#include "local_world.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {

std::string rank_list(const std::vector<Rank>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

LocalWorld::LocalWorld(int size)
    : size_(size),
      oversubscribed_(static_cast<unsigned>(size) >
                      std::max(1U, std::thread::hardware_concurrency())),
      rank_finished_(std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size))) {}

GroupChannel& LocalWorld::channel(std::uint64_t context, const std::vector<Rank>& world_ranks) {
  std::lock_guard lock(mutex_);
  std::pair<std::uint64_t, std::vector<Rank>> key{context, world_ranks};
  auto it = channels_.find(key);
  if (it == channels_.end()) {
    // Made before it is inserted: where memory runs out, nothing half-made stays in the map
    // for wake_channels to reach.
    auto made = std::make_unique<GroupChannel>(world_ranks);
    it = channels_.emplace(std::move(key), std::move(made)).first;
  }
  return *it->second;
}

void LocalWorld::wake_channels() {
  for (auto& [key, channel] : channels_) channel->wake();
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

bool LocalWorld::spin_for_change(std::unique_lock<std::mutex>& lock, Clock::time_point spin_until) {
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

void LocalWorld::fail(Rank rank, std::string_view message) {
  std::unique_lock lock(mutex_);
  if (!failure_) {
    try {
      failure_ = "rank " + std::to_string(rank) + " failed: " + std::string(message);
    } catch (const std::bad_alloc&) {
      failure_.emplace("rank failed");  // fits std::string's own buffer: allocates nothing
    }
  }
  failed_ = true;
  announce();
  wake_channels();
}

void LocalWorld::abort(Rank rank, std::string_view reason) {
  std::unique_lock lock(mutex_);
  if (!failure_) {
    try {
      failure_ = "rank " + std::to_string(rank) + " aborted: " + std::string(reason);
    } catch (const std::bad_alloc&) {
      failure_.emplace("aborted");
    }
  }
  failed_ = true;
  announce();
  wake_channels();
}

void LocalWorld::finish(Rank rank) {
  std::unique_lock lock(mutex_);
  if (finished_.insert(rank).second) ++finished_count_;
  rank_finished_[static_cast<std::size_t>(rank)] = true;
  announce();
  wake_channels();
}

std::optional<std::string> LocalWorld::failure() const {
  std::unique_lock lock(mutex_);
  return failure_;
}

}  // namespace shardwise::detail

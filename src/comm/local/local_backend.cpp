// The local backend: ranks are threads of one process. Collectives read peers' buffers directly
// through shared memory (no staging copies); point-to-point messages are buffered. Operations a
// rank starts without waiting run, in order, on a worker thread of its communicator, so the
// caller computes while they move data; a blocking call with nothing in flight runs on the
// calling thread.
#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "../detail/checks.hpp"
#include "../detail/comm_backend.hpp"
#include "../detail/reduce.hpp"
#include "../detail/work_state.hpp"
#include "local_world.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

namespace shardwise {
namespace {

using detail::CollectiveCall;
using detail::OpRequest;

const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }
std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }

// memcpy, but a zero-length copy may involve null pointers (empty buffers).
void copy_bytes(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

// Exchanges the contents of two disjoint ranges, through a buffer that stays in L1.
void swap_bytes(std::byte* a, std::byte* b, std::size_t bytes) {
  constexpr std::size_t kStep = 16 * 1024;
  std::array<std::byte, kStep> staged;
  for (std::size_t done = 0; done < bytes; done += kStep) {
    const std::size_t n = std::min(kStep, bytes - done);
    std::memcpy(staged.data(), a + done, n);
    std::memcpy(a + done, b + done, n);
    std::memcpy(b + done, staged.data(), n);
  }
}

// "pairs (0, 1), (1, 0)" in a canonical order, so that members that pass the same pairs in
// another order agree.
std::string pairs_text(const std::vector<PermutePair>& pairs) {
  std::vector<std::pair<int, int>> sorted;
  sorted.reserve(pairs.size());
  for (const PermutePair& p : pairs) sorted.emplace_back(p.source, p.destination);
  std::sort(sorted.begin(), sorted.end());
  std::string text = "pairs";
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    text += (i == 0 ? " (" : ", (") + std::to_string(sorted[i].first) + ", " +
            std::to_string(sorted[i].second) + ")";
  }
  return sorted.empty() ? "no pairs" : text;
}

// "counts 4, 7" for a coalesced call, so that members with other buffers disagree.
std::string counts_text(const std::vector<CoalescedBuffer>& buffers) {
  if (buffers.size() == 1) return "";
  std::string text = "buffers";
  for (const CoalescedBuffer& b : buffers) text += " " + std::to_string(b.count);
  return text;
}

std::size_t total_count(const std::vector<CoalescedBuffer>& buffers) {
  std::size_t count = 0;
  for (const CoalescedBuffer& b : buffers) count += b.count;
  return count;
}

// Member i's share [begin, end) of `count` elements split over n members.
std::pair<std::size_t, std::size_t> chunk(std::size_t count, std::size_t n, std::size_t i) {
  return {i * count / n, (i + 1) * count / n};
}

// Collectives whose input on each member is at most this many bytes run eagerly: inputs are
// staged in the channel and no barrier follows (two cache-line round trips fewer, which is
// most of a small collective's time).
constexpr std::size_t kEagerBytes = 16 * 1024;
// An eager all-reduce has every member reduce every member's whole input: it reads the group
// size times the buffer, where the two-phase one reads each input once among all members. It
// runs eagerly only for groups of at most kEagerReduceMembers and while that is at most
// kEagerReduceReadBytes per member (any buffer up to kEagerBytes for groups of up to 16), so
// that thousands of ranks do not each read every other's input (a quadratic number of cache
// misses, even for one float).
constexpr std::size_t kEagerReduceReadBytes = 16 * kEagerBytes;
constexpr std::size_t kEagerReduceMembers = 64;
// The least a member reduces of a two-phase all-reduce, in elements (see all_reduce).
constexpr std::size_t kLeastReduceChunk = 256;

// A context for a communicator split from `parent`: the same on every member, since every
// member splits in the same order.
std::uint64_t child_context(std::uint64_t parent, std::uint64_t split_index) {
  std::uint64_t h = parent ^ 0x9e3779b97f4a7c15ULL;
  h = (h ^ (split_index + 1)) * 0x100000001b3ULL;
  h ^= h >> 29;
  return h * 0xbf58476d1ce4e5b9ULL;
}

// The limits on this process's threads that the system sets, in words, for a message: "ulimit
// -u is 300, ulimit -v is 524288 KiB, kernel.threads-max 127448, the cgroup's pids.max 1000"
// (the ones that are set).
std::string thread_limits_text() {
  std::string text;
  const auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NPROC, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    add("ulimit -u is " + std::to_string(limit.rlim_cur) +
        (::geteuid() == 0 ? " (not applied to root)" : ""));
  }
  // Each thread's stack takes address space: a `ulimit -v` stops threads too.
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    add("ulimit -v is " + std::to_string(limit.rlim_cur / 1024) + " KiB");
  }
  const auto first_line = [](const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
  };
  if (const std::string max = first_line("/proc/sys/kernel/threads-max"); !max.empty()) {
    add("kernel.threads-max " + max);
  }
  if (const std::string max = first_line("/sys/fs/cgroup/pids.max"); !max.empty() && max != "max") {
    add("the cgroup's pids.max " + max);
  }
  return text.empty() ? "no limit is set that shardwise can read" : text;
}

std::string thread_start_failure(int started, int wanted, const std::string& reason) {
  return "the system would not start another thread (" + reason + ") after " +
         std::to_string(started) + " of the " + std::to_string(wanted) +
         " ranks' threads; every in-process rank is a thread (and a helper thread for "
         "nonblocking operations): run fewer ranks, or raise the limit (" +
         thread_limits_text() + ")";
}

class LocalBackend final : public detail::CommBackend {
 public:
  LocalBackend(detail::LocalWorld& world, std::vector<Rank> members, int index,
               std::uint64_t context)
      : world_(world), members_(std::move(members)), index_(index), context_(context) {}

  ~LocalBackend() override {
    {
      std::lock_guard lock(queue_mutex_);
      stopping_ = true;
    }
    work_queued_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  LocalBackend(const LocalBackend&) = delete;
  LocalBackend& operator=(const LocalBackend&) = delete;
  LocalBackend(LocalBackend&&) = delete;
  LocalBackend& operator=(LocalBackend&&) = delete;

  [[nodiscard]] Rank rank() const override { return index_; }
  [[nodiscard]] int size() const override { return static_cast<int>(members_.size()); }
  [[nodiscard]] std::string name() const override { return "local"; }
  [[nodiscard]] const std::vector<Rank>& world_ranks() const override { return members_; }

  Work start(OpRequest request) override {
    // Sends leave at once, whatever else is in flight: they never wait.
    if (request.op == CommOp::kSend) post_sends(request);
    auto state = std::make_shared<detail::SignalledWorkState>();
    enqueue(std::move(request), state);
    return Work(state);
  }

  // With nothing in flight, runs on the calling thread.
  void run_blocking(const OpRequest& request) override {
    if (request.op == CommOp::kSend) post_sends(request);
    {
      std::unique_lock lock(queue_mutex_);
      if (!queue_.empty() || running_) {
        // Operations started earlier run first, in order, on the worker.
        lock.unlock();
        auto state = std::make_shared<detail::SignalledWorkState>();
        enqueue(OpRequest(request), state);
        Work(state).wait();
        return;
      }
      running_ = true;
    }
    std::optional<std::string> failure = run_catching(request);
    {
      // Nobody waits for this: the worker waits for queued work, and waiting for the
      // communicator to go idle happens on this thread.
      std::lock_guard lock(queue_mutex_);
      running_ = false;
    }
    if (failure) throw CommError(*failure);
  }

  std::unique_ptr<CommBackend> split(const std::optional<std::vector<Rank>>& members,
                                     const std::string& agreement,
                                     const CommOptions& options) override {
    wait_until_idle();
    // Every member meets here, so that one that splits differently (or not at all) is named.
    CollectiveCall call("split", 0, DType::kF32, -1, nullptr, nullptr);
    call.agreement = agreement;
    collective(world_group(size()), index_, call, 0, options.timeout,
               [](const detail::CallView&, int, int) {});
    const std::uint64_t context = child_context(context_, splits_++);
    if (!members) return nullptr;
    std::vector<Rank> world;
    for (Rank r : *members) world.push_back(members_[static_cast<std::size_t>(r)]);
    const auto it = std::find(members->begin(), members->end(), index_);
    return std::make_unique<LocalBackend>(world_, std::move(world),
                                          static_cast<int>(it - members->begin()), context);
  }

  void abort(const std::string& reason) override {
    world_.abort(members_[static_cast<std::size_t>(index_)], reason);
  }

  bool with_peer_buffers(const void* mine, const Group& group,
                         const std::function<void(const std::vector<const void*>&)>& work,
                         const CommOptions& options) override {
    if (!share_buffers_) return false;
    wait_until_idle();
    const int member = group.index_of(index_);
    collective(group, member,
               CollectiveCall("with_peer_buffers", 0, DType::kF32, -1, mine, nullptr), 1,
               options.timeout, [&](const detail::CallView& calls, int, int) {
                 std::vector<const void*> peers;
                 peers.reserve(calls.size());
                 for (const CollectiveCall& c : calls) peers.push_back(c.in);
                 work(peers);
               });
    return true;
  }

  // For tests of the paths that do not read peers' memory.
  void set_share_buffers(bool share) { share_buffers_ = share; }

 private:
  struct Task {
    OpRequest request;
    std::shared_ptr<detail::SignalledWorkState> state;
  };

  // Queues an operation for the worker (its sends already posted).
  void enqueue(OpRequest request, std::shared_ptr<detail::SignalledWorkState> state) {
    {
      std::lock_guard lock(queue_mutex_);
      queue_.push_back({std::move(request), std::move(state)});
      if (!worker_.joinable()) start_worker();
    }
    work_queued_.notify_all();
  }

  void start_worker() {
    try {
      start_worker_thread();
    } catch (const std::system_error& e) {
      throw CommError(thread_start_failure(index_, size(), e.what()));
    }
  }

  void start_worker_thread() {
    worker_ = std::thread([this] {
      std::unique_lock lock(queue_mutex_);
      while (true) {
        work_queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        Task task = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
        lock.unlock();
        task.state->complete(run_catching(task.request));
        lock.lock();
        running_ = false;
        went_idle_.notify_all();
      }
    });
  }

  void wait_until_idle() {
    std::unique_lock lock(queue_mutex_);
    went_idle_.wait(lock, [&] { return queue_.empty() && !running_; });
  }

  // Runs a request to completion; its failure as text.
  std::optional<std::string> run_catching(const OpRequest& request) {
    try {
      run(request);
      return std::nullopt;
    } catch (const std::exception& e) {
      return std::string(e.what());
    } catch (...) {
      return std::string("an exception that is not a std::exception");
    }
  }

  // The channel of `group` (ranks of this communicator), looked up once per group.
  detail::GroupChannel& channel_of(const Group& group) {
    if (last_channel_ != nullptr && last_group_.same_ranks(group)) return *last_channel_;
    auto it = channels_.find(group.ranks());
    if (it == channels_.end()) {
      std::vector<Rank> world;
      world.reserve(group.ranks().size());
      for (Rank r : group.ranks()) world.push_back(members_[static_cast<std::size_t>(r)]);
      it = channels_.emplace(group.ranks(), &world_.channel(context_, world)).first;
    }
    last_group_ = group;
    last_channel_ = it->second;
    return *last_channel_;
  }

  void collective(const Group& group, int member, const CollectiveCall& call, int phases,
                  std::chrono::milliseconds timeout, detail::PhaseWork work) {
    world_.collective(channel_of(group), group, member, call, phases, timeout, work);
  }

  // An eager collective: call.in's first `bytes` are staged in the channel, peers read them
  // there, and no barrier follows (see LocalWorld::collective).
  void eager_collective(const Group& group, int member, const CollectiveCall& call,
                        std::size_t bytes, std::chrono::milliseconds timeout,
                        detail::PhaseWork work) {
    world_.collective(channel_of(group), group, member, call, 1, timeout, work, bytes);
  }

  void post_sends(const OpRequest& request) {
    const Rank me = members_[static_cast<std::size_t>(index_)];
    for (std::size_t i = 0; i < request.messages.size(); ++i) {
      const P2POp& m = request.messages[i];
      if (m.kind != P2POp::Kind::kSend) continue;
      world_.post(context_, me, members_[static_cast<std::size_t>(m.peer)], m.tag,
                  request.payloads[i]);
    }
  }

  void run(const OpRequest& request) {
    const int member = request.group.index_of(index_);
    switch (request.op) {
      case CommOp::kAllReduce: return all_reduce(request, member);
      case CommOp::kAllGather: return all_gather(request, member);
      case CommOp::kReduceScatter: return reduce_scatter(request, member);
      case CommOp::kAllToAll: return all_to_all(request, member);
      case CommOp::kAllToAllv: return all_to_allv(request, member);
      case CommOp::kBroadcast: return broadcast(request, member);
      case CommOp::kBarrier:
        return collective(request.group, member,
                          CollectiveCall("barrier", 0, DType::kF32, -1, nullptr, nullptr), 0,
                          request.options.timeout, [](const detail::CallView&, int, int) {});
      case CommOp::kPpermute: return ppermute(request, member);
      case CommOp::kSend:
      case CommOp::kRecv: return receive(request);
    }
  }

  void receive(const OpRequest& request) {
    const Rank me = members_[static_cast<std::size_t>(index_)];
    for (const P2POp& m : request.messages) {
      if (m.kind != P2POp::Kind::kRecv) continue;
      const std::size_t bytes = m.count * size_in_bytes(m.dtype);
      const std::vector<std::byte> message =
          world_.take(context_, members_[static_cast<std::size_t>(m.peer)], me, m.tag, bytes,
                      request.options.timeout);
      copy_bytes(m.buffer, message.data(), bytes);
    }
  }

  // The call of a (coalesced) reduction: members agree on the op and on every buffer's size.
  static CollectiveCall reduction_call(std::string_view name, const OpRequest& request) {
    const bool one = request.buffers.size() == 1;
    CollectiveCall call(name, total_count(request.buffers), request.dtype, -1,
                        one ? request.buffers[0].in : nullptr,
                        one ? request.buffers[0].out : nullptr);
    call.reduce_op = request.reduce;
    call.agreement = counts_text(request.buffers);
    call.buffers = &request.buffers;
    return call;
  }

  // Phase 0: each member reduces its chunk of every buffer from every input into its own
  // output. Phase 1: each member copies the other chunks from their owners' outputs.
  void all_reduce(const OpRequest& request, int member) {
    const std::size_t element = size_in_bytes(request.dtype);
    const auto n = static_cast<std::size_t>(request.group.size());
    const std::size_t buffers = request.buffers.size();
    if (buffers == 1 && n <= kEagerReduceMembers &&
        request.buffers[0].count * element <= kEagerBytes &&
        n * request.buffers[0].count * element <= kEagerReduceReadBytes) {
      // Each member reduces the whole buffer from every member's staged input.
      const CoalescedBuffer& buffer = request.buffers[0];
      return eager_collective(
          request.group, member, reduction_call("all_reduce", request), buffer.count * element,
          request.options.timeout, [&](const detail::CallView& calls, int, int) {
            inputs_.clear();
            for (const CollectiveCall& c : calls) inputs_.push_back(c.in);
            detail::reduce_into(inputs_, buffer.out, buffer.count, request.dtype, request.reduce);
          });
    }
    collective(request.group, member, reduction_call("all_reduce", request), 2,
               request.options.timeout, [&](const detail::CallView& calls, int m, int phase) {
                 const auto self = static_cast<std::size_t>(m);
                 for (std::size_t b = 0; b < buffers; ++b) {
                   const std::size_t count = request.buffers[b].count;
                   std::byte* out = bytes_of(request.buffers[b].out);
                   // The first `reducers` members each reduce a chunk of at least
                   // kLeastReduceChunk elements (all members, unless the buffer is small for
                   // the group), and every member copies the others' chunks: with thousands of
                   // members and a small buffer, chunks of a few elements each would be n^2
                   // pieces to move.
                   const std::size_t reducers =
                       std::min(n, std::max<std::size_t>(1, count / kLeastReduceChunk));
                   if (phase == 0) {
                     if (self >= reducers) continue;
                     const auto [begin, end] = chunk(count, reducers, self);
                     if (begin == end) continue;
                     std::vector<const void*> inputs;
                     for (const CollectiveCall& c : calls) {
                       inputs.push_back(bytes_of((*c.buffers)[b].in) + begin * element);
                     }
                     detail::reduce_into(inputs, out + begin * element, end - begin, request.dtype,
                                         request.reduce);
                     continue;
                   }
                   for (std::size_t i = 0; i < reducers; ++i) {
                     const auto [begin, end] = chunk(count, reducers, i);
                     if (i == self || begin == end) continue;
                     copy_bytes(out + begin * element,
                                bytes_of((*calls[i].buffers)[b].out) + begin * element,
                                (end - begin) * element);
                   }
                 }
               });
  }

  void all_gather(const OpRequest& request, int member) {
    const CoalescedBuffer& buffer = request.buffers[0];
    const std::size_t bytes = buffer.count * size_in_bytes(request.dtype);
    const CollectiveCall call("all_gather", buffer.count, request.dtype, -1, buffer.in, buffer.out);
    const auto gather = [&](const detail::CallView& calls, int m, int) {
      for (std::size_t j = 0; j < calls.size(); ++j) {
        std::byte* target = bytes_of(buffer.out) + j * bytes;
        const void* source = j == static_cast<std::size_t>(m) ? buffer.in : calls[j].in;
        if (target != source) copy_bytes(target, source, bytes);
      }
    };
    if (bytes <= kEagerBytes) {
      return eager_collective(request.group, member, call, bytes, request.options.timeout, gather);
    }
    collective(request.group, member, call, 1, request.options.timeout, gather);
  }

  void reduce_scatter(const OpRequest& request, int member) {
    const std::size_t element = size_in_bytes(request.dtype);
    const std::size_t buffers = request.buffers.size();
    const auto n = static_cast<std::size_t>(request.group.size());
    if (buffers == 1 && n * request.buffers[0].count * element <= kEagerBytes) {
      // Each member reduces its block from every member's staged input.
      const CoalescedBuffer& buffer = request.buffers[0];
      const std::size_t block = buffer.count * element;
      return eager_collective(
          request.group, member, reduction_call("reduce_scatter", request), n * block,
          request.options.timeout, [&](const detail::CallView& calls, int m, int) {
            inputs_.clear();
            for (const CollectiveCall& c : calls) {
              inputs_.push_back(bytes_of(c.in) + static_cast<std::size_t>(m) * block);
            }
            detail::reduce_into(inputs_, buffer.out, buffer.count, request.dtype, request.reduce);
          });
    }
    collective(request.group, member, reduction_call("reduce_scatter", request), 1,
               request.options.timeout, [&](const detail::CallView& calls, int m, int) {
                 for (std::size_t b = 0; b < buffers; ++b) {
                   const std::size_t count = request.buffers[b].count;
                   std::vector<const void*> inputs;
                   for (const CollectiveCall& c : calls) {
                     inputs.push_back(bytes_of((*c.buffers)[b].in) +
                                      static_cast<std::size_t>(m) * count * element);
                   }
                   detail::reduce_into(inputs, request.buffers[b].out, count, request.dtype,
                                       request.reduce);
                 }
               });
  }

  void all_to_all(const OpRequest& request, int member) {
    const CoalescedBuffer& buffer = request.buffers[0];
    const std::size_t bytes = buffer.count * size_in_bytes(request.dtype);
    const bool in_place = buffer.in == buffer.out;
    // As with MPI_IN_PLACE, every member runs in place or none does: the name makes a member
    // that differs a mismatched call.
    const CollectiveCall call(in_place ? "all_to_all in place" : "all_to_all", buffer.count,
                              request.dtype, -1, buffer.in, buffer.out);
    const auto n = static_cast<std::size_t>(request.group.size());
    if (n * bytes <= kEagerBytes) {
      // Block `self` of every member's staged input, in or out of place alike.
      return eager_collective(request.group, member, call, n * bytes, request.options.timeout,
                              [&](const detail::CallView& calls, int m, int) {
                                const auto self = static_cast<std::size_t>(m);
                                for (std::size_t j = 0; j < calls.size(); ++j) {
                                  copy_bytes(bytes_of(buffer.out) + j * bytes,
                                             bytes_of(calls[j].in) + self * bytes, bytes);
                                }
                              });
    }
    collective(request.group, member, call, 1, request.options.timeout,
               [&](const detail::CallView& calls, int m, int) {
                 const auto self = static_cast<std::size_t>(m);
                 for (std::size_t j = 0; j < calls.size(); ++j) {
                   if (!in_place) {
                     copy_bytes(bytes_of(buffer.out) + j * bytes,
                                bytes_of(calls[j].in) + self * bytes, bytes);
                     continue;
                   }
                   if (j == self) continue;  // in place, the own block stays where it is
                   // Members self and j swap block j of self with block self of j; each of the
                   // two swaps one half, so every byte is read once and written once.
                   const std::size_t half = bytes / 2;
                   const std::size_t begin = self < j ? 0 : half;
                   const std::size_t end = self < j ? half : bytes;
                   swap_bytes(bytes_of(buffer.out) + j * bytes + begin,
                              bytes_of(calls[j].out) + self * bytes + begin, end - begin);
                 }
               });
  }

  void all_to_allv(const OpRequest& request, int member) {
    const std::size_t element = size_in_bytes(request.dtype);
    const CoalescedBuffer& buffer = request.buffers[0];
    const BlockLayout& receive = request.receive;
    // A count that disagrees with its sender's is reported after the phase, so that every
    // member still reaches the barrier that ends it.
    std::string mismatch;
    CollectiveCall call("all_to_allv", 0, request.dtype, -1, buffer.in, buffer.out);
    call.send_layout = &request.send;
    collective(request.group, member, call, 1, request.options.timeout,
               [&](const detail::CallView& calls, int m, int) {
                 const auto self = static_cast<std::size_t>(m);
                 for (std::size_t i = 0; i < calls.size(); ++i) {
                   const BlockLayout& theirs = *calls[i].send_layout;
                   if (theirs.counts[self] != receive.counts[i]) {
                     mismatch = "all_to_allv over " + request.group.to_string() + ": rank " +
                                std::to_string(request.group.ranks()[self]) + " expects " +
                                std::to_string(receive.counts[i]) + " elements from rank " +
                                std::to_string(request.group.ranks()[i]) + ", which sends " +
                                std::to_string(theirs.counts[self]);
                     continue;
                   }
                   copy_bytes(bytes_of(buffer.out) + receive.offsets[i] * element,
                              bytes_of(calls[i].in) + theirs.offsets[self] * element,
                              receive.counts[i] * element);
                 }
               });
    if (!mismatch.empty()) throw CommError(mismatch);
  }

  void broadcast(const OpRequest& request, int member) {
    const CoalescedBuffer& buffer = request.buffers[0];
    const int root_member = request.group.index_of(request.root);
    const std::size_t bytes = buffer.count * size_in_bytes(request.dtype);
    const CollectiveCall call("broadcast", buffer.count, request.dtype, request.root, buffer.in,
                              buffer.out);
    const auto receive = [&](const detail::CallView& calls, int m, int) {
      if (m != root_member) {
        copy_bytes(buffer.out, calls[static_cast<std::size_t>(root_member)].in, bytes);
      }
    };
    if (bytes <= kEagerBytes) {
      // Only the root stages its buffer.
      return eager_collective(request.group, member, call, member == root_member ? bytes : 0,
                              request.options.timeout, receive);
    }
    collective(request.group, member, call, 1, request.options.timeout, receive);
  }

  void ppermute(const OpRequest& request, int member) {
    const CoalescedBuffer& buffer = request.buffers[0];
    const std::size_t bytes = buffer.count * size_in_bytes(request.dtype);
    const detail::PermuteRole role = detail::permute_role(request.pairs, member);
    CollectiveCall call("ppermute", buffer.count, request.dtype, -1, buffer.in, buffer.out);
    call.agreement = pairs_text(request.pairs);
    collective(request.group, member, call, 1, request.options.timeout,
               [&](const detail::CallView& calls, int, int) {
                 if (role.incoming == nullptr) {
                   if (bytes > 0) std::memset(buffer.out, 0, bytes);
                   return;
                 }
                 copy_bytes(buffer.out, calls[static_cast<std::size_t>(role.incoming->source)].in,
                            bytes);
               });
  }

  detail::LocalWorld& world_;
  std::vector<Rank> members_;  // world ranks, in this communicator's rank order
  int index_;                  // this member's rank in the communicator
  std::uint64_t context_;
  std::uint64_t splits_ = 0;
  std::vector<const void*> inputs_;  // reused by eager reductions (one runs at a time)
  bool share_buffers_ = true;
  std::map<std::vector<Rank>, detail::GroupChannel*> channels_;
  Group last_group_;  // the group of the last collective, and its channel
  detail::GroupChannel* last_channel_ = nullptr;

  std::mutex queue_mutex_;
  std::condition_variable work_queued_;  // the worker waits for work
  std::condition_variable went_idle_;    // wait_until_idle waits for the worker
  std::deque<Task> queue_;
  bool running_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

void run_local(int num_ranks, const std::function<void(Communicator&)>& fn,
               const LocalOptions& options) {
  if (num_ranks < 1 || num_ranks > kMaxLocalRanks) {
    throw InvalidArgument("run_local needs 1 to " + std::to_string(kMaxLocalRanks) +
                          " ranks, got " + std::to_string(num_ranks));
  }
  detail::LocalWorld world(num_ranks);
  std::vector<Rank> everyone(static_cast<std::size_t>(num_ranks));
  for (Rank r = 0; r < num_ranks; ++r) everyone[static_cast<std::size_t>(r)] = r;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(num_ranks));
  // Where a thread cannot start, memory is usually short: the failure is kept without
  // allocating (a rank number and a fixed buffer) until every started thread is joined.
  int unstarted = -1;
  char reason[160] = {};
  for (Rank r = 0; r < num_ranks; ++r) {
    try {
      threads.emplace_back([&world, &fn, &everyone, &options, r] {
        std::unique_ptr<Communicator> owned;
        try {
          auto backend = std::make_unique<LocalBackend>(world, everyone, r, 0);
          backend->set_share_buffers(options.share_buffers);
          owned = std::make_unique<Communicator>(std::move(backend));
        } catch (const std::exception& e) {
          world.fail(r, e.what());
          return;
        }
        // The communicator outlives the failure report: operations it still has in flight
        // then fail at once instead of waiting for their timeouts.
        Communicator& comm = *owned;
        try {
          fn(comm);
          world.finish(r);
        } catch (const std::exception& e) {
          world.fail(r, e.what());
        } catch (...) {
          world.fail(r, "an exception that is not a std::exception");
        }
      });
    } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc
      // The ranks that started wait for this one: fail them, and join them below.
      unstarted = r;
      std::snprintf(reason, sizeof reason, "%s", e.what());
      world.fail(r, "could not start");
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  if (unstarted >= 0) {
    throw CommError(thread_start_failure(unstarted, num_ranks, reason));
  }
  if (const auto failure = world.failure()) throw CommError(*failure);
}

}  // namespace shardwise

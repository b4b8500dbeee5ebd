// The local backend's Communicator: collectives read peers' buffers directly through shared
// memory (no staging copies); point-to-point messages are buffered.
#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include "../detail/checks.hpp"
#include "../detail/reduce.hpp"
#include "local_world.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using detail::CollectiveCall;

const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }

// memcpy, but a zero-length copy may involve null pointers (empty buffers).
void copy_bytes(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}
std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }

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

// Member i's share [begin, end) of `count` elements split over n members.
std::pair<std::size_t, std::size_t> chunk(std::size_t count, std::size_t n, std::size_t i) {
  return {i * count / n, (i + 1) * count / n};
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(detail::LocalWorld& world, Rank rank) : world_(world), rank_(rank) {}

  [[nodiscard]] Rank rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return world_.size(); }
  [[nodiscard]] std::string backend() const override { return "local"; }

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                  const Group& group, const AllReduceOptions& options) override {
    const int member = member_of(group, "all_reduce");
    const std::size_t element = size_in_bytes(dtype);
    const auto n = static_cast<std::size_t>(group.size());
    // Phase 0: each member reduces its chunk from every input into its own output.
    // Phase 1: each member copies the other chunks from their owners' outputs.
    CollectiveCall call{"all_reduce", count, dtype, -1, in, out};
    call.reduce_op = op;
    run(group, member, call, 2, options,
        [&](const std::vector<CollectiveCall>& calls, int m, int phase) {
          const auto self = static_cast<std::size_t>(m);
          if (phase == 0) {
            const auto [begin, end] = chunk(count, n, self);
            std::vector<const void*> inputs;
            for (const CollectiveCall& c : calls)
              inputs.push_back(bytes_of(c.in) + begin * element);
            detail::reduce_into(inputs, bytes_of(out) + begin * element, end - begin, dtype, op);
            return;
          }
          for (std::size_t i = 0; i < n; ++i) {
            if (i == self) continue;
            const auto [begin, end] = chunk(count, n, i);
            copy_bytes(bytes_of(out) + begin * element, bytes_of(calls[i].out) + begin * element,
                       (end - begin) * element);
          }
        });
    const auto [begin, end] = chunk(count, n, static_cast<std::size_t>(member));
    const auto moved = static_cast<std::int64_t>((count + (n - 2) * (end - begin)) * element);
    if (n > 1) counters().record("all_reduce", group.axes, moved, moved);
  }

  void all_gather(const void* in, void* out, std::size_t count, DType dtype, const Group& group,
                  const AllGatherOptions& options) override {
    const int member = member_of(group, "all_gather");
    const std::size_t bytes = count * size_in_bytes(dtype);
    run(group, member, {"all_gather", count, dtype, -1, in, out}, 1, options,
        [&](const std::vector<CollectiveCall>& calls, int, int) {
          for (std::size_t j = 0; j < calls.size(); ++j) {
            std::byte* target = bytes_of(out) + j * bytes;
            if (target != calls[j].in) copy_bytes(target, calls[j].in, bytes);
          }
        });
    detail::record_exchange(counters(), "all_gather", group, bytes);
  }

  void reduce_scatter(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                      const Group& group, const ReduceScatterOptions& options) override {
    const int member = member_of(group, "reduce_scatter");
    const std::size_t bytes = count * size_in_bytes(dtype);
    CollectiveCall call{"reduce_scatter", count, dtype, -1, in, out};
    call.reduce_op = op;
    run(group, member, call, 1, options,
        [&](const std::vector<CollectiveCall>& calls, int m, int) {
          std::vector<const void*> inputs;
          for (const CollectiveCall& c : calls) {
            inputs.push_back(bytes_of(c.in) + static_cast<std::size_t>(m) * bytes);
          }
          detail::reduce_into(inputs, out, count, dtype, op);
        });
    detail::record_exchange(counters(), "reduce_scatter", group, bytes);
  }

  void all_to_all(const void* in, void* out, std::size_t count, DType dtype, const Group& group,
                  const AllToAllOptions& options) override {
    const int member = member_of(group, "all_to_all");
    const std::size_t bytes = count * size_in_bytes(dtype);
    const bool in_place = in == out;
    // As with MPI_IN_PLACE, every member runs in place or none does: the name makes a member
    // that differs a mismatched call.
    run(group, member, {in_place ? "all_to_all in place" : "all_to_all", count, dtype, -1, in, out},
        1, options, [&](const std::vector<CollectiveCall>& calls, int m, int) {
          const auto self = static_cast<std::size_t>(m);
          for (std::size_t j = 0; j < calls.size(); ++j) {
            if (!in_place) {
              copy_bytes(bytes_of(out) + j * bytes, bytes_of(calls[j].in) + self * bytes, bytes);
              continue;
            }
            if (j == self) continue;  // in place, the own block stays where it is
            // Members self and j swap block j of self with block self of j; each of the two
            // swaps one half, so every byte is read once and written once, by one member.
            const std::size_t half = bytes / 2;
            const std::size_t begin = self < j ? 0 : half;
            const std::size_t end = self < j ? half : bytes;
            swap_bytes(bytes_of(out) + j * bytes + begin,
                       bytes_of(calls[j].out) + self * bytes + begin, end - begin);
          }
        });
    detail::record_exchange(counters(), "all_to_all", group, bytes);
  }

  void all_to_allv(const void* in, const BlockLayout& send, void* out, const BlockLayout& receive,
                   DType dtype, const Group& group, const AllToAllvOptions& options) override {
    const int member = member_of(group, "all_to_allv");
    detail::check_block_layouts(send, receive, group.size(), in, out);
    const std::size_t element = size_in_bytes(dtype);
    // A count that disagrees with its sender's is reported after the phase, so that every
    // member still reaches the barrier that ends it.
    std::string mismatch;
    CollectiveCall call{"all_to_allv", 0, dtype, -1, in, out};
    call.send_layout = &send;
    run(group, member, call, 1, options, [&](const std::vector<CollectiveCall>& calls, int m, int) {
      const auto self = static_cast<std::size_t>(m);
      for (std::size_t i = 0; i < calls.size(); ++i) {
        const BlockLayout& theirs = *calls[i].send_layout;
        // Every member checked its own layout has one entry per member before arriving.
        if (theirs.counts[self] != receive.counts[i]) {
          mismatch = "all_to_allv over " + group.to_string() + ": rank " +
                     std::to_string(group.ranks[self]) + " expects " +
                     std::to_string(receive.counts[i]) + " elements from rank " +
                     std::to_string(group.ranks[i]) + ", which sends " +
                     std::to_string(theirs.counts[self]);
          continue;
        }
        copy_bytes(bytes_of(out) + receive.offsets[i] * element,
                   bytes_of(calls[i].in) + theirs.offsets[self] * element,
                   receive.counts[i] * element);
      }
    });
    if (!mismatch.empty()) throw CommError(mismatch);
    if (options.count_bytes) {
      detail::record_all_to_allv(counters(), group, member, send, receive, element);
    }
  }

  void broadcast(void* buffer, std::size_t count, DType dtype, Rank root, const Group& group,
                 const BroadcastOptions& options) override {
    const int member = member_of(group, "broadcast");
    const int root_member = group.index_of(root);
    if (root_member < 0) {
      throw InvalidArgument("broadcast root " + std::to_string(root) + " is not in group " +
                            group.to_string());
    }
    const std::size_t bytes = count * size_in_bytes(dtype);
    run(group, member, {"broadcast", count, dtype, root, buffer, buffer}, 1, options,
        [&](const std::vector<CollectiveCall>& calls, int m, int) {
          if (m != root_member) {
            copy_bytes(buffer, calls[static_cast<std::size_t>(root_member)].in, bytes);
          }
        });
    const auto n = static_cast<std::int64_t>(group.size());
    if (n > 1) {
      const auto moved = static_cast<std::int64_t>(bytes);
      counters().record("broadcast", group.axes, member == root_member ? (n - 1) * moved : 0,
                        member == root_member ? 0 : moved);
    }
  }

  void barrier(const Group& group, const BarrierOptions& options) override {
    const int member = member_of(group, "barrier");
    run(group, member, {"barrier", 0, DType::kF32, -1, nullptr, nullptr}, 0, options,
        [](const std::vector<CollectiveCall>&, int, int) {});
  }

  void ppermute(const void* in, void* out, std::size_t count, DType dtype,
                const std::vector<PermutePair>& pairs, const Group& group,
                const PpermuteOptions& options) override {
    const int member = member_of(group, "ppermute");
    detail::check_permutation(pairs, group.size(), in, out, count);
    const std::size_t bytes = count * size_in_bytes(dtype);
    const detail::PermuteRole role = detail::permute_role(pairs, member);
    CollectiveCall call{"ppermute", count, dtype, -1, in, out};
    call.agreement = pairs_text(pairs);
    run(group, member, call, 1, options,
        [&](const std::vector<CollectiveCall>& calls, int, int) {
          if (role.incoming == nullptr) {
            if (bytes > 0) std::memset(out, 0, bytes);
            return;
          }
          copy_bytes(out, calls[static_cast<std::size_t>(role.incoming->source)].in, bytes);
        });
    detail::record_permute(counters(), group, role, bytes);
  }

  bool with_peer_buffers(const void* mine, const Group& group,
                         const std::function<void(const std::vector<const void*>&)>& work,
                         const CommOptions& options) override {
    const int member = member_of(group, "with_peer_buffers");
    run(group, member, {"with_peer_buffers", 0, DType::kF32, -1, mine, nullptr}, 1, options,
        [&](const std::vector<CollectiveCall>& calls, int, int) {
          std::vector<const void*> peers;
          peers.reserve(calls.size());
          for (const CollectiveCall& c : calls) peers.push_back(c.in);
          work(peers);
        });
    return true;
  }

  void send(const void* data, std::size_t count, DType dtype, Rank destination,
            const SendRecvOptions& options) override {
    detail::check_peer(destination, rank_, world_.size(), "send");
    const std::size_t bytes = count * size_in_bytes(dtype);
    std::vector<std::byte> copy(bytes_of(data), bytes_of(data) + bytes);
    world_.post(rank_, destination, options.tag, std::move(copy));
    counters().record("send", options.axes, static_cast<std::int64_t>(bytes), 0);
  }

  void recv(void* data, std::size_t count, DType dtype, Rank source,
            const SendRecvOptions& options) override {
    detail::check_peer(source, rank_, world_.size(), "recv");
    detail::check_options(options, "recv");
    const std::size_t bytes = count * size_in_bytes(dtype);
    const std::vector<std::byte> message =
        world_.take(source, rank_, options.tag, bytes, options.timeout);
    copy_bytes(data, message.data(), bytes);
    counters().record("recv", options.axes, 0, static_cast<std::int64_t>(bytes));
  }

 private:
  int member_of(const Group& group, const char* op) const {
    return detail::member_index(group, rank_, world_.size(), op);
  }

  void run(const Group& group, int member, const CollectiveCall& call, int phases,
           const CommOptions& options, const detail::LocalWorld::Work& work) {
    detail::check_options(options, call.op.data());
    const std::uint64_t sequence = sequence_[group.ranks]++;
    world_.collective(group, member, sequence, call, phases, options.timeout, work);
  }

  detail::LocalWorld& world_;
  Rank rank_;
  std::map<std::vector<Rank>, std::uint64_t> sequence_;
};

}  // namespace

void run_local(int num_ranks, const std::function<void(Communicator&)>& fn) {
  if (num_ranks < 1 || num_ranks > kMaxLocalRanks) {
    throw InvalidArgument("run_local needs 1 to " + std::to_string(kMaxLocalRanks) +
                          " ranks, got " + std::to_string(num_ranks));
  }
  detail::LocalWorld world(num_ranks);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(num_ranks));
  std::optional<std::string> start_failure;
  for (Rank r = 0; r < num_ranks; ++r) {
    try {
      threads.emplace_back([&world, &fn, r] {
        try {
          LocalCommunicator comm(world, r);
          fn(comm);
          world.finish(r);
        } catch (const std::exception& e) {
          world.fail(r, e.what());
        } catch (...) {
          world.fail(r, "an exception that is not a std::exception");
        }
      });
    } catch (const std::system_error& e) {
      // The ranks that started wait for this one: fail them, and join them below.
      start_failure = "run_local could not start rank " + std::to_string(r) + " of " +
                      std::to_string(num_ranks) + ": " + e.what();
      world.fail(r, *start_failure);
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  if (start_failure) throw CommError(*start_failure);
  if (const auto failure = world.failure()) throw CommError(*failure);
}

}  // namespace shardwise

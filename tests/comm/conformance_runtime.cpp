// The conformance checks of the runtime's second part, for every backend: nonblocking work that
// overlaps the caller's computing, coalesced buffers, batched point-to-point, sub-communicators
// and the one byte accounting.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "conformance_checks.hpp"

namespace shardwise::testing {
namespace {

std::string where(const Communicator& comm) {
  return "rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size());
}

// Sum over ranks r of (r + e % 5).
double rank_sum(int n, std::size_t e) {
  return n * (n - 1) / 2.0 + n * static_cast<double>(e % 5);
}

std::vector<float> rank_values(const Communicator& comm, std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t e = 0; e < count; ++e) values[e] = static_cast<float>(comm.rank() + e % 5);
  return values;
}

}  // namespace

void check_nonblocking(Communicator& comm) {
  const int n = comm.size();
  const Group world = world_group(n);
  // One operation in flight while the caller computes; it completes correctly.
  std::vector<float> in = rank_values(comm, 4096);
  std::vector<float> out(in.size());
  Work work = comm.iall_reduce(in.data(), out.data(), in.size(), DType::kF32, ReduceOp::kSum, world);
  double computed = 0;
  std::int64_t spins = 0;
  while (!work.test()) {
    for (int k = 0; k < 1000; ++k) computed += k * 1e-9;
    ++spins;
  }
  work.wait();
  EXPECT_TRUE(work.finished());
  EXPECT_EQ(work.error(), std::nullopt);
  EXPECT_GE(computed, 0.0);
  for (std::size_t e = 0; e < out.size(); ++e) {
    ASSERT_EQ(out[e], rank_sum(n, e)) << where(comm) << " element " << e;
  }
  // Several in flight at once, waited for in another order, with a blocking call among them.
  const std::size_t block = 33;
  std::vector<float> gathered(block * static_cast<std::size_t>(n));
  std::vector<float> scattered(block);
  std::vector<float> scatter_in(block * static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < scatter_in.size(); ++i) scatter_in[i] = static_cast<float>(i % 7);
  std::vector<float> root_data(50, comm.rank() == 0 ? 3.0F : 0.0F);
  std::vector<float> mine(block, static_cast<float>(comm.rank()));
  Work gather = comm.iall_gather(mine.data(), gathered.data(), block, DType::kF32, world);
  Work scatter = comm.ireduce_scatter(scatter_in.data(), scattered.data(), block, DType::kF32,
                                      ReduceOp::kSum, world);
  std::vector<float> blocking_in(5, 1.0F);
  Work broadcast = comm.ibroadcast(root_data.data(), root_data.size(), DType::kF32, 0, world);
  comm.all_reduce(blocking_in.data(), blocking_in.data(), 5, DType::kF32, ReduceOp::kSum, world);
  broadcast.wait();
  scatter.wait();
  gather.wait();
  for (std::size_t i = 0; i < gathered.size(); ++i) {
    ASSERT_EQ(gathered[i], static_cast<float>(i / block)) << where(comm);
  }
  for (std::size_t i = 0; i < block; ++i) {
    const std::size_t global = static_cast<std::size_t>(comm.rank()) * block + i;
    ASSERT_EQ(scattered[i], static_cast<float>(n * (global % 7))) << where(comm);
  }
  for (float v : root_data) ASSERT_EQ(v, 3.0F) << where(comm);
  for (float v : blocking_in) ASSERT_EQ(v, static_cast<float>(n)) << where(comm);
  // A finished Work waits again without effect.
  work.wait();
}

void check_coalesced(Communicator& comm) {
  const int n = comm.size();
  const Group world = world_group(n);
  std::vector<std::vector<float>> buffers{rank_values(comm, 7), {}, rank_values(comm, 1000)};
  std::vector<CoalescedBuffer> bucket;
  for (auto& b : buffers) bucket.push_back({b.data(), b.data(), b.size()});
  comm.all_reduce_coalesced(bucket, DType::kF32, ReduceOp::kSum, world);
  for (const auto& b : buffers) {
    for (std::size_t e = 0; e < b.size(); ++e) ASSERT_EQ(b[e], rank_sum(n, e)) << where(comm);
  }
  // Reduce-scatter of two buffers of 3 and 5 elements per member.
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> outputs;
  for (std::size_t count : {3U, 5U}) {
    std::vector<float> in(count * static_cast<std::size_t>(n));
    std::iota(in.begin(), in.end(), 0.0F);
    inputs.push_back(std::move(in));
    outputs.emplace_back(count);
  }
  std::vector<CoalescedBuffer> pieces;
  for (std::size_t b = 0; b < inputs.size(); ++b) {
    pieces.push_back({inputs[b].data(), outputs[b].data(), outputs[b].size()});
  }
  comm.ireduce_scatter_coalesced(pieces, DType::kF32, ReduceOp::kSum, world).wait();
  for (std::size_t b = 0; b < outputs.size(); ++b) {
    for (std::size_t e = 0; e < outputs[b].size(); ++e) {
      const std::size_t global = static_cast<std::size_t>(comm.rank()) * outputs[b].size() + e;
      ASSERT_EQ(outputs[b][e], static_cast<float>(n * global)) << where(comm);
    }
  }
}

void check_batched_point_to_point(Communicator& comm) {
  const int n = comm.size();
  if (n < 2) return;
  const Rank right = (comm.rank() + 1) % n;
  const Rank left = (comm.rank() + n - 1) % n;
  // A ring in one batch: every rank receives from its left and sends to its right at once.
  std::vector<float> outgoing(17, static_cast<float>(comm.rank()));
  std::vector<float> incoming(17, -1.0F);
  comm.batch_isend_irecv({{P2POp::Kind::kRecv, incoming.data(), 17, DType::kF32, left, 5},
                          {P2POp::Kind::kSend, outgoing.data(), 17, DType::kF32, right, 5}})
      .wait();
  for (float v : incoming) ASSERT_EQ(v, static_cast<float>(left)) << where(comm);
  // Not in lockstep: three sends go out first, their receives come later in another order.
  std::vector<std::int64_t> sent{1, 2, 3};
  std::vector<Work> sends;
  for (int tag = 1; tag <= 3; ++tag) {
    std::int64_t value = comm.rank() * 10 + tag;
    sends.push_back(comm.isend(&value, 1, DType::kI64, right, SendRecvOptions{{}, tag, "p2p"}));
  }
  for (int tag = 3; tag >= 1; --tag) {
    std::int64_t value = 0;
    comm.irecv(&value, 1, DType::kI64, left, SendRecvOptions{{}, tag, "p2p"}).wait();
    ASSERT_EQ(value, left * 10 + tag) << where(comm);
  }
  for (Work& send : sends) send.wait();
}

void check_sub_communicators(Communicator& comm) {
  const int n = comm.size();
  // new_group of the first and last ranks; the others get none.
  std::unique_ptr<Communicator> ends =
      comm.new_group(n == 1 ? std::vector<Rank>{0} : std::vector<Rank>{0, n - 1});
  const bool member = comm.rank() == 0 || comm.rank() == n - 1;
  ASSERT_EQ(ends != nullptr, member) << where(comm);
  if (ends) {
    EXPECT_EQ(ends->size(), n == 1 ? 1 : 2);
    EXPECT_EQ(ends->world_ranks().at(static_cast<std::size_t>(ends->rank())),
              comm.world_ranks().at(static_cast<std::size_t>(comm.rank())));
    std::int64_t value = comm.rank();
    ends->all_reduce(&value, &value, 1, DType::kI64, ReduceOp::kSum, world_group(ends->size()));
    EXPECT_EQ(value, n == 1 ? 0 : n - 1) << where(comm);
  }
  if (n % 2 != 0) return;
  // A 2 x n/2 mesh: a communicator per 'model' group, and within it collectives touch only
  // its members.
  const Mesh mesh({"data", "model"}, {2, n / 2});
  std::unique_ptr<Communicator> model = comm.split(mesh, {"model"});
  const Group expected = group_along(mesh, {"model"}, comm.rank());
  ASSERT_EQ(model->size(), n / 2);
  EXPECT_EQ(model->rank(), expected.index_of(comm.rank()));
  std::vector<Rank> world_of_members;
  for (Rank r : expected.ranks()) {
    world_of_members.push_back(comm.world_ranks().at(static_cast<std::size_t>(r)));
  }
  EXPECT_EQ(model->world_ranks(), world_of_members);
  std::vector<std::int64_t> sums(16, comm.rank());
  const Group along = world_group(model->size()).relabeled("model");
  model->counters().clear();
  model->all_reduce(sums.data(), sums.data(), sums.size(), DType::kI64, ReduceOp::kSum, along);
  for (std::int64_t sum : sums) {
    EXPECT_EQ(sum, std::accumulate(expected.ranks().begin(), expected.ranks().end(),
                               std::int64_t{0}));
  }
  if (n > 2) {
    EXPECT_GT(model->counters().for_axes("model").sent, 0);
  }
  std::int64_t sum = sums.front();
  // The parent still works, its operations apart from the child's.
  std::unique_ptr<Communicator> data = comm.split(mesh, {"data"});
  EXPECT_EQ(data->size(), 2);
  Work in_flight = model->iall_reduce(&sum, &sum, 1, DType::kI64, ReduceOp::kMax, along);
  comm.barrier(world_group(n));
  in_flight.wait();
}

void check_byte_accounting(Communicator& comm) {
  const int n = comm.size();
  const auto self = static_cast<std::size_t>(comm.rank());
  const Group world = world_group(n);
  const auto count = std::size_t{7};
  std::vector<float> a(count * static_cast<std::size_t>(n), 1.0F);
  std::vector<float> b(count * static_cast<std::size_t>(n));
  comm.counters().clear();
  comm.all_reduce(a.data(), b.data(), count, DType::kF32, ReduceOp::kSum, world);
  comm.all_gather(a.data(), b.data(), count, DType::kF32, world);
  comm.reduce_scatter(a.data(), b.data(), count, DType::kF32, ReduceOp::kSum, world);
  comm.all_to_all(a.data(), b.data(), 1, DType::kF32, world);
  comm.broadcast(a.data(), count, DType::kF32, 0, world);
  comm.barrier(world);
  const auto un = static_cast<std::size_t>(n);
  const auto own = (self + 1) * count / un - self * count / un;
  const auto ring = static_cast<std::int64_t>(2 * (count - own) * 4);
  const auto exchange = static_cast<std::int64_t>((un - 1) * count * 4);
  const bool root = comm.rank() == 0;
  if (n == 1) {
    EXPECT_EQ(comm.counters().total(), ByteCount{});
    return;
  }
  EXPECT_EQ(comm.counters().for_op(CommOp::kAllReduce), (ByteCount{ring, ring, 1})) << where(comm);
  EXPECT_EQ(comm.counters().for_op(CommOp::kAllGather), (ByteCount{exchange, exchange, 1}));
  EXPECT_EQ(comm.counters().for_op(CommOp::kReduceScatter), (ByteCount{exchange, exchange, 1}));
  const auto one = static_cast<std::int64_t>((un - 1) * 4);
  EXPECT_EQ(comm.counters().for_op(CommOp::kAllToAll), (ByteCount{one, one, 1}));
  EXPECT_EQ(comm.counters().for_op(CommOp::kBroadcast),
            (ByteCount{root ? exchange : 0, root ? 0 : 28, 1}));
  EXPECT_EQ(comm.counters().for_op(CommOp::kBarrier), ByteCount{});
}

void check_barrier(Communicator& comm) {
  const Group world = world_group(comm.size());
  const ByteCounters before = comm.counters();
  for (int i = 0; i < 3; ++i) comm.barrier(world);
  Work work = comm.ibarrier(world);
  work.wait();
  EXPECT_TRUE(work.finished());
  // A barrier moves no bytes.
  EXPECT_EQ(comm.counters().total(), before.total());
}

}  // namespace shardwise::testing

#include "conformance_checks.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "typed_buffer.hpp"

namespace shardwise::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                             DType::kI32, DType::kI64, DType::kU8,   DType::kI8};
constexpr std::size_t kSizes[] = {0, 1, 7, 1000, 65539};

bool is_integer(DType dtype) { return !is_floating(dtype); }

// Values small enough that bf16 and f16 hold them exactly.
double value_of(int rank, std::size_t e) { return rank + static_cast<double>(e % 5); }

std::string where(const Communicator& comm, DType dtype, std::size_t count) {
  return "rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) + ", " +
         to_string(dtype) + " x " + std::to_string(count);
}

double expected_reduction(int n, std::size_t e, ReduceOp op, DType dtype) {
  const double offset = static_cast<double>(e % 5);
  switch (op) {
    case ReduceOp::kSum: return n * (n - 1) / 2.0 + n * offset;
    case ReduceOp::kMax: return (n - 1) + offset;
    case ReduceOp::kMin: return offset;
    case ReduceOp::kAvg: {
      const double sum = n * (n - 1) / 2.0 + n * offset;
      return is_integer(dtype) ? std::trunc(sum / n) : sum / n;
    }
  }
  return 0;
}

double tolerance(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 ? 0.25 : 1e-9;
}

}  // namespace

void check_all_reduce(Communicator& comm, DType dtype, std::size_t count, ReduceOp op) {
  const Group world = world_group(comm.size());
  TypedBuffer in(dtype, count);
  TypedBuffer out(dtype, count);
  for (std::size_t e = 0; e < count; ++e) in.set(e, value_of(comm.rank(), e));
  comm.all_reduce(in.data(), out.data(), count, dtype, op, world);
  for (std::size_t e = 0; e < count; ++e) {
    ASSERT_NEAR(out.get(e), expected_reduction(comm.size(), e, op, dtype), tolerance(dtype))
        << where(comm, dtype, count) << " " << to_string(op) << " element " << e;
  }
}

void check_all_reduce_in_place(Communicator& comm, DType dtype, std::size_t count) {
  TypedBuffer buffer(dtype, count);
  for (std::size_t e = 0; e < count; ++e) buffer.set(e, value_of(comm.rank(), e));
  comm.all_reduce(buffer.data(), buffer.data(), count, dtype, ReduceOp::kSum,
                  world_group(comm.size()));
  for (std::size_t e = 0; e < count; ++e) {
    ASSERT_NEAR(buffer.get(e), expected_reduction(comm.size(), e, ReduceOp::kSum, dtype),
                tolerance(dtype))
        << where(comm, dtype, count) << " element " << e;
  }
}

void check_all_gather(Communicator& comm, DType dtype, std::size_t count) {
  const auto n = static_cast<std::size_t>(comm.size());
  TypedBuffer in(dtype, count);
  TypedBuffer out(dtype, count * n);
  for (std::size_t e = 0; e < count; ++e) in.set(e, value_of(comm.rank(), e));
  comm.all_gather(in.data(), out.data(), count, dtype, world_group(comm.size()));
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t e = 0; e < count; ++e) {
      ASSERT_EQ(out.get(j * count + e), value_of(static_cast<int>(j), e))
          << where(comm, dtype, count) << " block " << j << " element " << e;
    }
  }
}

void check_reduce_scatter(Communicator& comm, DType dtype, std::size_t count) {
  const auto n = static_cast<std::size_t>(comm.size());
  TypedBuffer in(dtype, count * n);
  TypedBuffer out(dtype, count);
  // Block j of rank r holds r + j + (e % 5): block r reduces to n(n-1)/2 + n (r + e % 5).
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t e = 0; e < count; ++e) {
      in.set(j * count + e, value_of(comm.rank(), e) + static_cast<double>(j));
    }
  }
  comm.reduce_scatter(in.data(), out.data(), count, dtype, ReduceOp::kSum,
                      world_group(comm.size()));
  const double size = static_cast<double>(n);
  for (std::size_t e = 0; e < count; ++e) {
    const double expected =
        size * (size - 1) / 2 + size * (comm.rank() + static_cast<double>(e % 5));
    ASSERT_NEAR(out.get(e), expected, tolerance(dtype)) << where(comm, dtype, count) << " " << e;
  }
}

void check_all_to_all(Communicator& comm, DType dtype, std::size_t count, bool in_place) {
  const auto n = static_cast<std::size_t>(comm.size());
  TypedBuffer in(dtype, count * n);
  TypedBuffer separate_out(dtype, in_place ? 0 : count * n);
  TypedBuffer& out = in_place ? in : separate_out;
  // Rank r sends r * n + j + (e % 5) to rank j (values stay below 90).
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t e = 0; e < count; ++e) {
      in.set(j * count + e, static_cast<double>(comm.rank() * n + j + e % 5));
    }
  }
  comm.all_to_all(in.data(), out.data(), count, dtype, world_group(comm.size()));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t e = 0; e < count; ++e) {
      ASSERT_EQ(out.get(i * count + e), static_cast<double>(i * n + comm.rank() + e % 5))
          << where(comm, dtype, count) << (in_place ? " in place" : "") << " from " << i;
    }
  }
}

void check_all_to_allv(Communicator& comm, DType dtype, std::size_t scale) {
  const auto n = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  // Member i sends scale x ((i + 2j) % 3) elements to member j: some blocks are empty, no two
  // members send alike. Received blocks land in reverse member order with a one-element gap.
  auto count = [&](std::size_t i, std::size_t j) { return scale * ((i + 2 * j) % 3); };
  BlockLayout send;
  BlockLayout receive;
  std::size_t sent = 0;
  for (std::size_t j = 0; j < n; ++j) {
    send.counts.push_back(count(me, j));
    send.offsets.push_back(sent);
    sent += count(me, j);
  }
  receive.counts.assign(n, 0);
  receive.offsets.assign(n, 0);
  std::size_t received = 0;
  for (std::size_t i = n; i-- > 0;) {
    receive.counts[i] = count(i, me);
    receive.offsets[i] = received;
    received += count(i, me) + 1;
  }
  TypedBuffer in(dtype, sent);
  TypedBuffer out(dtype, received);
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t e = 0; e < send.counts[j]; ++e) {
      in.set(send.offsets[j] + e, static_cast<double>(me * n + j + e % 5));
    }
  }
  comm.all_to_allv(in.data(), send, out.data(), receive, dtype, world_group(comm.size()));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t e = 0; e < receive.counts[i]; ++e) {
      ASSERT_EQ(out.get(receive.offsets[i] + e), static_cast<double>(i * n + me + e % 5))
          << where(comm, dtype, scale) << " all_to_allv from " << i << " element " << e;
    }
  }
}

void check_broadcast(Communicator& comm, DType dtype, std::size_t count) {
  const Rank root = comm.size() - 1;
  TypedBuffer buffer(dtype, count);
  for (std::size_t e = 0; e < count; ++e) buffer.set(e, value_of(comm.rank(), e));
  comm.broadcast(buffer.data(), count, dtype, root, world_group(comm.size()));
  for (std::size_t e = 0; e < count; ++e) {
    ASSERT_EQ(buffer.get(e), value_of(root, e)) << where(comm, dtype, count);
  }
}

void check_ppermute(Communicator& comm, DType dtype, std::size_t count) {
  const int n = comm.size();
  const int me = comm.rank();
  TypedBuffer in(dtype, count);
  TypedBuffer out(dtype, count);
  for (std::size_t e = 0; e < count; ++e) in.set(e, value_of(me, e));
  // A ring shift: every member receives from the one before it (itself when n = 1).
  std::vector<PermutePair> shift;
  for (int i = 0; i < n; ++i) shift.push_back({i, (i + 1) % n});
  comm.ppermute(in.data(), out.data(), count, dtype, shift, world_group(n));
  const int previous = (me + n - 1) % n;
  for (std::size_t e = 0; e < count; ++e) {
    ASSERT_EQ(out.get(e), value_of(previous, e)) << where(comm, dtype, count) << " shift";
  }
  // One edge, 0 -> n-1: every other member gets zeros.
  for (std::size_t e = 0; e < count; ++e) out.set(e, 99);
  comm.ppermute(in.data(), out.data(), count, dtype, {{0, n - 1}}, world_group(n));
  for (std::size_t e = 0; e < count; ++e) {
    ASSERT_EQ(out.get(e), me == n - 1 ? value_of(0, e) : 0.0)
        << where(comm, dtype, count) << " one edge";
  }
}

void check_send_recv_ring(Communicator& comm, DType dtype, std::size_t count) {
  if (comm.size() < 2) return;
  const Rank next = (comm.rank() + 1) % comm.size();
  const Rank previous = (comm.rank() + comm.size() - 1) % comm.size();
  TypedBuffer out(dtype, count);
  TypedBuffer in(dtype, count);
  for (std::size_t e = 0; e < count; ++e) out.set(e, value_of(comm.rank(), e));
  SendRecvOptions options;
  options.tag = 7;
  comm.send(out.data(), count, dtype, next, options);
  comm.recv(in.data(), count, dtype, previous, options);
  for (std::size_t e = 0; e < count; ++e) {
    ASSERT_EQ(in.get(e), value_of(previous, e)) << where(comm, dtype, count);
  }
}

void check_mesh_axis_groups(Communicator& comm) {
  if (comm.size() % 2 != 0) return;
  const Mesh mesh({"data", "model"}, {2, comm.size() / 2});
  for (const std::string& axis : {std::string("data"), std::string("model")}) {
    const Group group = group_along(mesh, {axis}, comm.rank());
    std::int32_t rank_value = comm.rank();
    std::int32_t sum = 0;
    comm.all_reduce(&rank_value, &sum, 1, DType::kI32, ReduceOp::kSum, group);
    std::int32_t expected = 0;
    for (Rank r : group.ranks()) expected += r;
    EXPECT_EQ(sum, expected) << "rank " << comm.rank() << " along " << axis;
    std::vector<std::int32_t> gathered(static_cast<std::size_t>(group.size()));
    comm.all_gather(&rank_value, gathered.data(), 1, DType::kI32, group);
    EXPECT_EQ(std::vector<std::int32_t>(group.ranks().begin(), group.ranks().end()), gathered);
  }
}


void run_all_checks(Communicator& comm) {
  for (DType dtype : kDTypes) {
    for (std::size_t count : kSizes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        check_all_reduce(comm, dtype, count, op);
      }
      check_all_reduce_in_place(comm, dtype, count);
      check_all_gather(comm, dtype, count);
      check_reduce_scatter(comm, dtype, count);
      check_all_to_all(comm, dtype, count, /*in_place=*/false);
      check_all_to_all(comm, dtype, count, /*in_place=*/true);
      check_broadcast(comm, dtype, count);
      check_ppermute(comm, dtype, count);
      check_all_to_allv(comm, dtype, count);
      check_send_recv_ring(comm, dtype, count);
    }
  }
  check_mesh_axis_groups(comm);
  check_barrier(comm);
  check_nonblocking(comm);
  check_coalesced(comm);
  check_batched_point_to_point(comm);
  check_sub_communicators(comm);
  check_byte_accounting(comm);
}

}  // namespace shardwise::testing

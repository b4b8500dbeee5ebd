// Resharding uses the collective that matches the pattern, along only the axes that change,
// on only the ranks of the array's mesh, with plans compiled once.
#include "reshard_checks.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "shardwise/array/placement_ops.hpp"
#include "shardwise/array/resharder.hpp"

namespace shardwise::testing {
namespace {

const Mesh kMesh({"data", "model"}, {2, 4});

std::vector<float> iota_array(std::size_t count) {
  std::vector<float> host(count);
  std::iota(host.begin(), host.end(), 0.0F);
  return host;
}

// The value of the array (element i is i) at every element of this rank's block.
void expect_iota_block(const ShardedArray& array) {
  const Shape& shape = array.global_shape();
  const ShardIndex& index = array.local_index();
  const auto local = array.local<float>();
  std::size_t i = 0;
  for (std::int64_t r = index[0].start; r < index[0].stop; ++r) {
    for (std::int64_t c = index[1].start; c < index[1].stop; ++c) {
      ASSERT_EQ(local[i++], static_cast<float>(r * shape[1] + c)) << array.to_string();
    }
  }
}

}  // namespace

void check_each_pattern_uses_its_collective_along_the_axes_that_change(Communicator& comm) {
  const Shape shape{16, 16};
  const std::vector<float> host = iota_array(256);
  Resharder resharder(comm);
  auto place = [&](const P& spec) {
    return shard_replicated(comm, host.data(), shape, DType::kF32, NamedSharding(kMesh, spec));
  };
  struct Case {
    P from;
    P to;
    CommOp op;
    std::string axes;
  };
  const std::vector<Case> cases{
      {P{"model"}, P(), CommOp::kAllGather, "model"},               // FSDP's gather
      {P{{"data", "model"}}, P{"data"}, CommOp::kAllGather, "model"},
      {P{None, "model"}, P{"model", None}, CommOp::kAllToAll, "model"},
      {P{"data", "model"}, P{"data"}, CommOp::kAllGather, "model"},  // not contiguous: staged
  };
  for (const Case& c : cases) {
    const ShardedArray source = place(c.from);
    comm.counters().clear();
    const ShardedArray moved = resharder.reshard(source, NamedSharding(kMesh, c.to));
    expect_iota_block(moved);
    EXPECT_EQ(comm.counters().for_op(c.op).calls, 1) << c.from << " -> " << c.to;
    // Only the axes that change carry bytes.
    EXPECT_EQ(comm.counters().total(), comm.counters().for_axes(c.axes))
        << c.from << " -> " << c.to;
  }
  // Replicate -> Shard is a local slice.
  comm.counters().clear();
  expect_iota_block(resharder.reshard(place(P()), NamedSharding(kMesh, P{"data", "model"})));
  EXPECT_EQ(comm.counters().total(), ByteCount{});
}

void check_plans_are_compiled_once_and_reused(Communicator& comm) {
  const Shape shape{16, 16};
  const std::vector<float> host = iota_array(256);
  Resharder resharder(comm);
  const ShardedArray source =
      shard_replicated(comm, host.data(), shape, DType::kF32, NamedSharding(kMesh, P{"model"}));
  ShardedArray target = ShardedArray::allocate(NamedSharding(kMesh, P{None, "data"}), shape,
                                               DType::kF32, comm.rank());
  for (int step = 0; step < 5; ++step) resharder.reshard_into(source, target);
  EXPECT_EQ(resharder.plans(), 1U);
  expect_iota_block(target);
  (void)resharder.reshard(source, NamedSharding(kMesh, P()));
  EXPECT_EQ(resharder.plans(), 2U);
}

// An array on a pipeline stage (ranks 4..7 of 8): only they reshard it, while ranks 0..3 run
// their own collective at the same time.
void check_an_array_on_a_sub_mesh_involves_only_its_ranks(Communicator& comm) {
  const Shape shape{8, 8};
  const std::vector<float> host = iota_array(64);
  if (comm.rank() < 4) {
    std::int64_t value = 1;
    comm.all_reduce(&value, &value, 1, DType::kI64, ReduceOp::kSum, Group{{0, 1, 2, 3}, "x"});
    EXPECT_EQ(value, 4);
    return;
  }
  const Mesh stage({"data", "model"}, {2, 2}, std::vector<DeviceId>{4, 5, 6, 7});
  const ShardedArray rows = shard_replicated(comm, host.data(), shape, DType::kF32,
                                             NamedSharding(stage, P{"data", "model"}));
  for (const P& spec : {P(), P{"model", "data"}, P{None, {"data", "model"}}}) {
    expect_iota_block(reshard(comm, rows, NamedSharding(stage, spec)));
  }
  EXPECT_EQ(gather(comm, rows).size(), 64U * 4U);
}

// A pending sum reduces straight into a view of a flat buffer.
void check_partial_sources_reduce_into_the_target(Communicator& comm) {
  const Shape shape{8, 4};
  std::vector<float> values = iota_array(32);
  const ShardedArray partial(NamedSharding(kMesh, P()), shape, DType::kF32, comm.rank(),
                             std::vector<std::byte>(reinterpret_cast<std::byte*>(values.data()),
                                                    reinterpret_cast<std::byte*>(values.data() + 32)),
                             {{"model", ReduceOp::kSum}});
  std::vector<float> flat(8, -1.0F);
  ShardedArray target = ShardedArray::view(
      NamedSharding(kMesh, P{"model"}), shape, DType::kF32, comm.rank(),
      {reinterpret_cast<std::byte*>(flat.data()), flat.size() * sizeof(float)});
  comm.counters().clear();
  Resharder(comm).reshard_into(partial, target);
  EXPECT_EQ(comm.counters().for_op(CommOp::kReduceScatter).calls, 1);
  const std::int64_t m = kMesh.coords_of(comm.rank())[1];
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(flat[i], 4.0F * static_cast<float>(m * 8 + static_cast<std::int64_t>(i)));
  }
  // The same sharding, nothing pending: an all-reduce into the target.
  std::vector<float> whole(32);
  ShardedArray replicated = ShardedArray::view(
      NamedSharding(kMesh, P()), shape, DType::kF32, comm.rank(),
      {reinterpret_cast<std::byte*>(whole.data()), whole.size() * sizeof(float)});
  comm.counters().clear();
  Resharder(comm).reshard_into(partial, replicated);
  EXPECT_EQ(comm.counters().for_op(CommOp::kAllReduce).calls, 1);
  EXPECT_EQ(whole[31], 124.0F);
}

}  // namespace shardwise::testing

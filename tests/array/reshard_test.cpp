#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>

#include "error_of.hpp"
#include "shardwise/array/placement_ops.hpp"
#include "shardwise/array/transfer_plan.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

const Mesh kMesh({"data", "model"}, {2, 4});

std::vector<float> iota_array(const Shape& shape) {
  std::vector<float> host(static_cast<std::size_t>(num_elements(shape)));
  std::iota(host.begin(), host.end(), 0.0F);
  return host;
}

std::vector<std::byte> bytes_of(const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The elements of `index` of a row-major array of `shape` whose element i is i.
std::vector<float> expected_block(const Shape& shape, const ShardIndex& index) {
  std::vector<float> out;
  const Shape block = shape_of(index);
  if (num_elements(block) == 0) return out;
  std::vector<std::int64_t> at(index.size());
  for (std::size_t d = 0; d < index.size(); ++d) at[d] = index[d].start;
  while (true) {
    std::int64_t linear = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) linear = linear * shape[d] + at[d];
    out.push_back(static_cast<float>(linear));
    std::size_t d = index.size();
    while (d > 0) {
      --d;
      if (++at[d] < index[d].stop) break;
      at[d] = index[d].start;
      if (d == 0) return out;
    }
    if (index.empty()) return out;
  }
}

void expect_block(const ShardedArray& array) {
  const std::vector<float> expected = expected_block(array.global_shape(), array.local_index());
  const auto local = array.local<float>();
  ASSERT_EQ(local.size(), expected.size()) << array.to_string() << " rank " << array.rank();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(local[i], expected[i]) << array.to_string() << " rank " << array.rank() << " " << i;
  }
}

std::vector<NamedSharding> shardings(Evenness evenness) {
  std::vector<NamedSharding> out;
  for (const P& spec : {P(), P{"data"}, P{"model"}, P{"data", "model"}, P{"model", "data"},
                        P{None, {"data", "model"}}, P{{"model", "data"}}, P{None, "model"}}) {
    out.emplace_back(kMesh, spec, evenness);
  }
  return out;
}

TEST(ShardReplicated, KeepsTheLocalBlockWithoutTraffic) {
  const Shape shape{8, 16};
  const std::vector<float> host = iota_array(shape);
  run_local(8, [&](Communicator& comm) {
    for (const NamedSharding& sharding : shardings(Evenness::kStrict)) {
      const ShardedArray array = shard_replicated(comm, host.data(), shape, DType::kF32, sharding);
      expect_block(array);
    }
    EXPECT_EQ(comm.counters().total(), ByteCount{});
  });
}

TEST(ScatterFrom, SendsEveryRankItsBlockFromTheRoot) {
  const Shape shape{8, 16};
  const std::vector<float> host = iota_array(shape);
  run_local(8, [&](Communicator& comm) {
    const NamedSharding sharding(kMesh, P{"data", "model"});
    const ShardedArray array = scatter_from(comm, 3, comm.rank() == 3 ? host.data() : nullptr,
                                            shape, DType::kF32, sharding);
    expect_block(array);
    const std::int64_t block = 4 * 4 * 4;
    EXPECT_EQ(comm.counters().total().sent, comm.rank() == 3 ? 7 * block : 0);
    EXPECT_EQ(comm.counters().total().received, comm.rank() == 3 ? 0 : block);
  });
}

// Bytes every rank must receive to go from one sharding to another, counted from the layouts
// alone: each device's target block less what its own source block holds.
std::int64_t bytes_lacking(const NamedSharding& from, const NamedSharding& to, const Shape& shape) {
  std::int64_t bytes = 0;
  for (const DeviceShard& target : to.devices_indices_map(shape)) {
    const ShardIndex own = from.device_index(shape, target.device);
    bytes += (num_elements(shape_of(target.index)) -
              num_elements(shape_of(intersect(target.index, own)))) *
             4;
  }
  return bytes;
}

// Every pair of a set of shardings, strict and uneven: the blocks are right, gathering gives
// the array back bit for bit, and each rank receives exactly what it lacked. With
// `share_buffers` off, the paths for ranks that do not share memory run.
void reshard_every_pair(const Shape& shape, const std::vector<NamedSharding>& all,
                        bool share_buffers = true) {
  const std::vector<float> host = iota_array(shape);
  run_local(8, [&](Communicator& comm) {
    for (const NamedSharding& from : all) {
      const ShardedArray source = shard_replicated(comm, host.data(), shape, DType::kF32, from);
      for (const NamedSharding& to : all) {
        comm.counters().clear();
        ShardedArray moved = reshard(comm, source, to);
        expect_block(moved);
        std::fill(moved.local_bytes().begin(), moved.local_bytes().end(), std::byte{0});
        comm.counters().clear();
        reshard_into(comm, source, moved);
        expect_block(moved);
        // What this rank had to receive: its target block less what its source block holds.
        const std::int64_t wanted = num_elements(moved.local_shape());
        const std::int64_t held =
            num_elements(shape_of(intersect(moved.local_index(), source.local_index())));
        EXPECT_EQ(comm.counters().total().received, (wanted - held) * 4)
            << from.spec() << " -> " << to.spec() << " rank " << comm.rank();
        std::int64_t received_by_all = comm.counters().total().received;
        comm.all_reduce(&received_by_all, &received_by_all, 1, DType::kI64, ReduceOp::kSum,
                        world_group(8));
        EXPECT_EQ(received_by_all, bytes_lacking(from, to, shape));
      }
      EXPECT_EQ(gather(comm, source), bytes_of(host)) << from.spec();
    }
  }, LocalOptions{share_buffers});
}

TEST(Reshard, EveryPairStrict) { reshard_every_pair({8, 16}, shardings(Evenness::kStrict)); }
TEST(Reshard, EveryPairUneven) { reshard_every_pair({7, 10}, shardings(Evenness::kUneven)); }
TEST(Reshard, EveryPairWithoutSharedBuffers) {
  reshard_every_pair({8, 16}, shardings(Evenness::kStrict), false);
  reshard_every_pair({7, 10}, shardings(Evenness::kUneven), false);
}
TEST(Reshard, EmptyAndScalarArrays) {
  reshard_every_pair({0, 8}, shardings(Evenness::kStrict));
  reshard_every_pair({}, {NamedSharding(kMesh, P())});
}

TEST(Reshard, ReplicasTakeTurnsSending) {
  // Each block is held by its 2 'data' replicas; they send its pieces in turn.
  const NamedSharding from(kMesh, P{None, "model"});
  const NamedSharding to(kMesh, P{"model", "data"});
  const Shape shape{8, 8};
  std::map<std::string, std::map<Rank, int>> pieces;  // source block -> holder -> pieces sent
  for (const DeviceShard& shard : from.devices_indices_map(shape)) {
    pieces[to_string(shard.index)][static_cast<Rank>(shard.device)] = 0;
  }
  for (const Transfer& t : plan_transfers(from, to, shape)) {
    if (t.from == t.to) continue;
    const std::string block = to_string(from.device_index(shape, t.from));
    ++pieces[block][t.from];
  }
  for (const auto& [block, holders] : pieces) {
    ASSERT_EQ(holders.size(), 2u) << block;
    EXPECT_LE(std::abs(holders.begin()->second - holders.rbegin()->second), 1) << block;
    EXPECT_GT(holders.begin()->second + holders.rbegin()->second, 0) << block;
  }
}

TEST(Reshard, PartialSumToShardIsAReduceScatter) {
  const Shape shape{8, 4};
  run_local(8, [&](Communicator& comm) {
    // Every rank holds the whole array times (rank's 'model' coordinate + 1): a pending sum
    // over 'model' whose value is 10 x the array.
    const NamedSharding replicated(kMesh, P());
    const std::int64_t m = kMesh.coords_of(comm.rank())[1];
    std::vector<float> values = iota_array(shape);
    for (float& v : values) v *= static_cast<float>(m + 1);
    const ShardedArray partial(replicated, shape, DType::kF32, comm.rank(), bytes_of(values),
                               {{"model", ReduceOp::kSum}});
    EXPECT_EQ(partial.placements()[1], Placement{Partial{ReduceOp::kSum}});
    comm.counters().clear();
    const ShardedArray summed = reshard(comm, partial, NamedSharding(kMesh, P{"model"}));
    EXPECT_EQ(comm.counters().for_op(CommOp::kReduceScatter).calls, 1);
    EXPECT_EQ(comm.counters().for_op(CommOp::kAllReduce).calls, 0);
    const std::vector<float> expected = expected_block(shape, summed.local_index());
    const auto local = summed.local<float>();
    for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(local[i], 10 * expected[i]);
    // Split along the inner dimension: the slices are packed before the reduce-scatter.
    comm.counters().clear();
    const ShardedArray columns = reshard(comm, partial, NamedSharding(kMesh, P{None, "model"}));
    EXPECT_EQ(comm.counters().for_op(CommOp::kReduceScatter).calls, 1);
    const std::vector<float> expected_columns = expected_block(shape, columns.local_index());
    for (std::size_t i = 0; i < expected_columns.size(); ++i)
      EXPECT_EQ(columns.local<float>()[i], 10 * expected_columns[i]);
    // To a layout the partial axis does not split: an all-reduce, then a reshard.
    const ShardedArray gathered = reshard(comm, partial, NamedSharding(kMesh, P{"data"}));
    const std::vector<float> rows = expected_block(shape, gathered.local_index());
    for (std::size_t i = 0; i < rows.size(); ++i)
      EXPECT_EQ(gathered.local<float>()[i], 10 * rows[i]);
    std::vector<float> whole(32);
    const std::vector<std::byte> bytes = gather(comm, partial);
    std::memcpy(whole.data(), bytes.data(), bytes.size());
    EXPECT_EQ(whole[31], 310.0F);
  });
}

TEST(GatherTo, OnlyTheRootReceives) {
  const Shape shape{8, 16};
  const std::vector<float> host = iota_array(shape);
  run_local(8, [&](Communicator& comm) {
    const ShardedArray array = shard_replicated(comm, host.data(), shape, DType::kF32,
                                                NamedSharding(kMesh, P{"data", "model"}));
    const std::vector<std::byte> out = gather_to(comm, array, 5);
    if (comm.rank() == 5) {
      EXPECT_EQ(out, bytes_of(host));
      EXPECT_EQ(comm.counters().total().received, (128 - 16) * 4);
    } else {
      EXPECT_TRUE(out.empty());
    }
  });
}

TEST(ShardedArray, Errors) {
  const NamedSharding sharding(kMesh, P{"data"});
  EXPECT_THAT(
      error_of([&] { ShardedArray(sharding, {8}, DType::kF32, 0, std::vector<std::byte>(3)); }),
      HasSubstr("rank 0 block [0:4] of f32 needs 16 bytes, got 3"));
  EXPECT_THAT(error_of([&] {
                ShardedArray(sharding, {8}, DType::kF32, 0, std::vector<std::byte>(16),
                             {{"data", ReduceOp::kSum}});
              }),
              HasSubstr("axis 'data' is partial and also shards P('data')"));
  EXPECT_THAT(error_of([&] {
                run_local(4, [&](Communicator& comm) {
                  std::vector<float> host(8);
                  (void)shard_replicated(comm, host.data(), {8}, DType::kF32, sharding);
                });
              }),
              HasSubstr("names device 4, which is not a rank of the local communicator (0..3)"));
}

}  // namespace
}  // namespace shardwise

#include "shardwise/core/named_sharding.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unordered_set>

#include "error_of.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

const Mesh kMesh2x4({"data", "model"}, {2, 4});

TEST(NamedSharding, SpecErrorsAtConstruction) {
  EXPECT_THAT(error_of([] {
                NamedSharding(kMesh2x4, P{"data", "expert"});
              }),
              HasSubstr("partition spec P('data', 'expert') names axis 'expert' in dimension 1, "
                        "which is not in Mesh('data': 2, 'model': 4)"));
  EXPECT_THAT(error_of([] {
                NamedSharding(kMesh2x4, P{"model", None, "model"});
              }),
              HasSubstr("axis 'model' is used by dimensions 0 and 2 of P('model', None, 'model')"));
  EXPECT_THAT(error_of([] {
                NamedSharding(kMesh2x4, P{{"model", "model"}});
              }),
              HasSubstr("axis 'model' appears twice in dimension 0"));
  EXPECT_THROW(NamedSharding(kMesh2x4, P{"x"}), ShardingError);
}

TEST(NamedSharding, ShapeErrorsNameDimensionAxesAndSizes) {
  const NamedSharding sharding(kMesh2x4, P{None, {"data", "model"}});
  EXPECT_THAT(error_of([&] {
                sharding.validate({8, 10});
              }),
              HasSubstr("dimension 1 has size 10, not divisible by 8 shards of ('data', 'model') "
                        "of sizes 2 x 4"));
  EXPECT_THAT(error_of([&] { (void)sharding.shard_shape({8}); }),
              HasSubstr("partition spec P(None, ('data', 'model')) has 2 entries but the array of "
                        "shape (8,) has rank 1"));
  EXPECT_THAT(error_of([&] {
                (void)sharding.devices_indices_map({8, 6});
              }),
              HasSubstr("not divisible"));
  EXPECT_THAT(error_of([&] {
                (void)sharding.device_index({8, 16}, 8);
              }),
              HasSubstr("device 8 is not in"));
  const NamedSharding one_axis(kMesh2x4, P{"model"});
  EXPECT_THAT(
      error_of([&] { one_axis.validate({6}); }),
      HasSubstr("dimension 0 has size 6, not divisible by 4 shards of ('model') of size 4"));
}

TEST(NamedSharding, ShardShapeAndCounts) {
  const NamedSharding sharding(kMesh2x4, P{"data", None});
  EXPECT_THAT(sharding.shard_shape({8, 16}), ElementsAre(4, 16));
  EXPECT_THAT(sharding.num_shards(2), ElementsAre(2, 1));
  EXPECT_THAT(sharding.num_shards(3), ElementsAre(2, 1, 1));
  EXPECT_EQ(sharding.num_replicas(), 4);
  EXPECT_FALSE(sharding.is_fully_replicated());
  EXPECT_THROW((void)sharding.num_shards(1), ShardingError);

  const NamedSharding both(kMesh2x4, P{None, {"model", "data"}});
  EXPECT_THAT(both.shard_shape({3, 16}), ElementsAre(3, 2));
  EXPECT_EQ(both.num_replicas(), 1);
}

TEST(NamedSharding, ReplicatedAndScalar) {
  const NamedSharding replicated(kMesh2x4, P());
  EXPECT_TRUE(replicated.is_fully_replicated());
  EXPECT_EQ(replicated.num_replicas(), 8);
  const auto shards = replicated.devices_indices_map({});
  ASSERT_EQ(shards.size(), 8u);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    EXPECT_TRUE(shards[i].index.empty());
    EXPECT_EQ(shards[i].replica_id, static_cast<std::int64_t>(i));
  }
  EXPECT_THAT(replicated.shard_shape({}), ElementsAre());
}

TEST(NamedSharding, AxesOfSizeOneChangeNothing) {
  const Mesh mesh({"data", "pipe", "model"}, {2, 1, 2});
  const NamedSharding with(mesh, P{{"data", "pipe"}, "model"});
  const NamedSharding without(mesh, P{"data", "model"});
  EXPECT_EQ(with.devices_indices_map({4, 4}), without.devices_indices_map({4, 4}));
  EXPECT_TRUE(with.is_equivalent_to(without, 2));
  EXPECT_NE(with, without);
}

TEST(NamedSharding, ReplicaIdsCountEarlierHoldersInMeshOrder) {
  const NamedSharding sharding(kMesh2x4, P{"model"});
  std::vector<std::int64_t> ids;
  for (const auto& shard : sharding.devices_indices_map({8})) ids.push_back(shard.replica_id);
  // Devices 0 and 4 hold shard 0, 1 and 5 shard 1, ...
  EXPECT_THAT(ids, ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
  EXPECT_EQ(sharding.replica_id({8}, 5), 1);
  EXPECT_THROW((void)sharding.replica_id({8}, 9), InvalidArgument);
}

TEST(NamedSharding, EmptyIndicesCountAsReplicasOfEachOther) {
  // As jax.Array does: with a dimension of size 0 every device holds the same empty index.
  const NamedSharding sharding(Mesh({"a", "b"}, {2, 3}), P{None, "b"});
  std::vector<std::int64_t> ids;
  for (const auto& shard : sharding.devices_indices_map({1, 0})) ids.push_back(shard.replica_id);
  EXPECT_THAT(ids, ElementsAre(0, 1, 2, 3, 4, 5));
  // Uneven: the two empty trailing shards of 2 elements over 4 share the range [2:2].
  const NamedSharding uneven(Mesh({"x"}, {4}), P{"x"}, Evenness::kUneven);
  ids.clear();
  for (const auto& shard : uneven.devices_indices_map({2})) ids.push_back(shard.replica_id);
  EXPECT_THAT(ids, ElementsAre(0, 0, 0, 1));
}

TEST(NamedSharding, DeviceOrderFollowsExplicitIds) {
  const Mesh mesh({"x"}, {4}, std::vector<DeviceId>{3, 1, 2, 0});
  const NamedSharding sharding(mesh, P{"x"});
  const auto shards = sharding.devices_indices_map({8});
  EXPECT_EQ(shards[0].device, 3);
  EXPECT_EQ(shards[0].index, (ShardIndex{{0, 2}}));
  EXPECT_EQ(sharding.device_index({8}, 0), (ShardIndex{{6, 8}}));
}

TEST(NamedSharding, UnevenFollowsTorchChunk) {
  // torch.chunk(arange(10), 4) -> sizes 3, 3, 3, 1; (5, 4) -> 2, 2, 1, 0.
  const NamedSharding sharding(Mesh({"x"}, {4}), P{"x"}, Evenness::kUneven);
  auto ranges = [&](std::int64_t n) {
    std::vector<IndexRange> out;
    for (const auto& shard : sharding.devices_indices_map({n})) out.push_back(shard.index[0]);
    return out;
  };
  EXPECT_THAT(ranges(10),
              ElementsAre(IndexRange{0, 3}, IndexRange{3, 6}, IndexRange{6, 9}, IndexRange{9, 10}));
  EXPECT_THAT(ranges(5),
              ElementsAre(IndexRange{0, 2}, IndexRange{2, 4}, IndexRange{4, 5}, IndexRange{5, 5}));
  EXPECT_THAT(ranges(2),
              ElementsAre(IndexRange{0, 1}, IndexRange{1, 2}, IndexRange{2, 2}, IndexRange{2, 2}));
  EXPECT_THAT(ranges(0),
              ElementsAre(IndexRange{0, 0}, IndexRange{0, 0}, IndexRange{0, 0}, IndexRange{0, 0}));
  EXPECT_THAT(sharding.shard_shape({10}), ElementsAre(3));
  EXPECT_THAT(sharding.shard_shape({8}), ElementsAre(2));  // divisible: same as strict
  EXPECT_THROW(NamedSharding(Mesh({"x"}, {4}), P{"x"}).validate({10}), ShardingError);
}

TEST(NamedSharding, EquivalenceComparesPerDeviceIndices) {
  const NamedSharding a(kMesh2x4, P{"data"});
  const NamedSharding b(kMesh2x4, P{"data", None});
  const NamedSharding c(kMesh2x4, P{"model"});
  EXPECT_TRUE(a.is_equivalent_to(b, 2));
  EXPECT_FALSE(a.is_equivalent_to(c, 1));
  // The same layout over a mesh with its axes transposed and its devices permuted to match.
  const Mesh transposed({"model", "data"}, {4, 2}, std::vector<DeviceId>{0, 4, 1, 5, 2, 6, 3, 7});
  EXPECT_TRUE(NamedSharding(transposed, P{"data"}).is_equivalent_to(a, 1));
  EXPECT_TRUE(NamedSharding(transposed, P{{"data", "model"}})
                  .is_equivalent_to(NamedSharding(kMesh2x4, P{{"data", "model"}}), 1));
  EXPECT_FALSE(NamedSharding(kMesh2x4, P{{"model", "data"}})
                   .is_equivalent_to(NamedSharding(kMesh2x4, P{{"data", "model"}}), 1));
  const Mesh other_devices({"data", "model"}, {2, 4},
                           std::vector<DeviceId>{8, 9, 10, 11, 12, 13, 14, 15});
  EXPECT_FALSE(NamedSharding(other_devices, P{"data"}).is_equivalent_to(a, 1));
}

TEST(NamedSharding, PrintsEqualsAndHashes) {
  const NamedSharding a(kMesh2x4, P{"data"});
  EXPECT_EQ(a.to_string(), "NamedSharding(mesh=Mesh('data': 2, 'model': 4), spec=P('data'))");
  EXPECT_EQ(NamedSharding(kMesh2x4, P{"data"}, Evenness::kUneven).to_string(),
            "NamedSharding(mesh=Mesh('data': 2, 'model': 4), spec=P('data'), uneven)");
  std::unordered_set<NamedSharding> set{a, NamedSharding(kMesh2x4, P{"data"}),
                                        NamedSharding(kMesh2x4, P{"model"})};
  EXPECT_EQ(set.size(), 2u);
}

}  // namespace
}  // namespace shardwise

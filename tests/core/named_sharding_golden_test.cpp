// Layouts whose answers are published by JAX (the sharding tutorials' 4 x 2 mesh of 8 devices)
// or were read off jax.sharding.NamedSharding.devices_indices_map and replica ids of
// jax.Array.addressable_shards on 8 CPU devices.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "shardwise/core/named_sharding.hpp"

namespace shardwise {
namespace {

struct Expected {
  DeviceId device;
  ShardIndex index;
  std::int64_t replica_id;
};

struct GoldenCase {
  std::string name;
  Mesh mesh;
  P spec;
  Shape shape;
  Shape shard_shape;
  std::vector<Expected> shards;  // in mesh order
};

const Mesh kMesh4x2({"x", "y"}, {4, 2});

std::vector<GoldenCase> golden_cases() {
  return {
      {"tutorial_x_y_8x8",
       kMesh4x2,
       P{"x", "y"},
       {8, 8},
       {2, 4},
       {{0, {{0, 2}, {0, 4}}, 0},
        {1, {{0, 2}, {4, 8}}, 0},
        {2, {{2, 4}, {0, 4}}, 0},
        {3, {{2, 4}, {4, 8}}, 0},
        {4, {{4, 6}, {0, 4}}, 0},
        {5, {{4, 6}, {4, 8}}, 0},
        {6, {{6, 8}, {0, 4}}, 0},
        {7, {{6, 8}, {4, 8}}, 0}}},
      {"tutorial_x_none_8x8",
       kMesh4x2,
       P{"x", None},
       {8, 8},
       {2, 8},
       {{0, {{0, 2}, {0, 8}}, 0},
        {1, {{0, 2}, {0, 8}}, 1},
        {2, {{2, 4}, {0, 8}}, 0},
        {3, {{2, 4}, {0, 8}}, 1},
        {4, {{4, 6}, {0, 8}}, 0},
        {5, {{4, 6}, {0, 8}}, 1},
        {6, {{6, 8}, {0, 8}}, 0},
        {7, {{6, 8}, {0, 8}}, 1}}},
      {"tutorial_none_y_8x8",
       kMesh4x2,
       P{None, "y"},
       {8, 8},
       {8, 4},
       {{0, {{0, 8}, {0, 4}}, 0},
        {1, {{0, 8}, {4, 8}}, 0},
        {2, {{0, 8}, {0, 4}}, 1},
        {3, {{0, 8}, {4, 8}}, 1},
        {4, {{0, 8}, {0, 4}}, 2},
        {5, {{0, 8}, {4, 8}}, 2},
        {6, {{0, 8}, {0, 4}}, 3},
        {7, {{0, 8}, {4, 8}}, 3}}},
      {"tutorial_xy_tuple_8x8",
       kMesh4x2,
       P{{"x", "y"}, None},
       {8, 8},
       {1, 8},
       {{0, {{0, 1}, {0, 8}}, 0},
        {1, {{1, 2}, {0, 8}}, 0},
        {2, {{2, 3}, {0, 8}}, 0},
        {3, {{3, 4}, {0, 8}}, 0},
        {4, {{4, 5}, {0, 8}}, 0},
        {5, {{5, 6}, {0, 8}}, 0},
        {6, {{6, 7}, {0, 8}}, 0},
        {7, {{7, 8}, {0, 8}}, 0}}},
      {"minor_axis_first_tuple",
       kMesh4x2,
       P{{"y", "x"}},
       {8},
       {1},
       {{0, {{0, 1}}, 0},
        {1, {{4, 5}}, 0},
        {2, {{1, 2}}, 0},
        {3, {{5, 6}}, 0},
        {4, {{2, 3}}, 0},
        {5, {{6, 7}}, 0},
        {6, {{3, 4}}, 0},
        {7, {{7, 8}}, 0}}},
      {"replica_ids_follow_mesh_order",
       kMesh4x2,
       P{"y"},
       {8, 4},
       {4, 4},
       {{0, {{0, 4}, {0, 4}}, 0},
        {1, {{4, 8}, {0, 4}}, 0},
        {2, {{0, 4}, {0, 4}}, 1},
        {3, {{4, 8}, {0, 4}}, 1},
        {4, {{0, 4}, {0, 4}}, 2},
        {5, {{4, 8}, {0, 4}}, 2},
        {6, {{0, 4}, {0, 4}}, 3},
        {7, {{4, 8}, {0, 4}}, 3}}},
      {"three_axes_transposed_dims",
       Mesh({"a", "b", "c"}, {2, 2, 2}),
       P{"c", None, "a"},
       {4, 3, 6},
       {2, 3, 3},
       {{0, {{0, 2}, {0, 3}, {0, 3}}, 0},
        {1, {{2, 4}, {0, 3}, {0, 3}}, 0},
        {2, {{0, 2}, {0, 3}, {0, 3}}, 1},
        {3, {{2, 4}, {0, 3}, {0, 3}}, 1},
        {4, {{0, 2}, {0, 3}, {3, 6}}, 0},
        {5, {{2, 4}, {0, 3}, {3, 6}}, 0},
        {6, {{0, 2}, {0, 3}, {3, 6}}, 1},
        {7, {{2, 4}, {0, 3}, {3, 6}}, 1}}},
      {"explicit_device_order",
       Mesh({"x"}, {4}, std::vector<DeviceId>{2, 0, 3, 1}),
       P{"x"},
       {4},
       {1},
       {{2, {{0, 1}}, 0}, {0, {{1, 2}}, 0}, {3, {{2, 3}}, 0}, {1, {{3, 4}}, 0}}},
  };
}

class NamedShardingGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(NamedShardingGolden, MatchesJax) {
  const GoldenCase& c = GetParam();
  const NamedSharding sharding(c.mesh, c.spec);
  EXPECT_EQ(sharding.shard_shape(c.shape), c.shard_shape);
  const std::vector<DeviceShard> shards = sharding.devices_indices_map(c.shape);
  ASSERT_EQ(shards.size(), c.shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    EXPECT_EQ(shards[i].device, c.shards[i].device) << "mesh position " << i;
    EXPECT_EQ(to_string(shards[i].index), to_string(c.shards[i].index)) << "mesh position " << i;
    EXPECT_EQ(shards[i].replica_id, c.shards[i].replica_id) << "mesh position " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Jax, NamedShardingGolden, ::testing::ValuesIn(golden_cases()),
                         [](const auto& test) { return test.param.name; });

}  // namespace
}  // namespace shardwise

// Properties every layout must have, over many random meshes (1-4 axes), specs and shapes,
// strict and uneven: each element is held by exactly as many devices as there are replicas,
// the shards of replica 0 tile the array, and replica ids run 0..r-1 in mesh order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "shardwise/core/named_sharding.hpp"

namespace shardwise {
namespace {

struct RandomCase {
  NamedSharding sharding;
  Shape shape;
};

Mesh random_mesh(std::mt19937& rng) {
  const int axes = std::uniform_int_distribution<int>(1, 4)(rng);
  std::vector<std::string> names;
  std::vector<std::int64_t> sizes;
  for (int a = 0; a < axes; ++a) {
    names.push_back("axis" + std::to_string(a));
    sizes.push_back(std::uniform_int_distribution<std::int64_t>(1, 4)(rng));
  }
  Mesh mesh(names, sizes);
  if (rng() % 3 == 0) {  // a permuted device assignment
    std::vector<DeviceId> ids = mesh.device_ids();
    std::shuffle(ids.begin(), ids.end(), rng);
    mesh = Mesh(names, sizes, ids);
  }
  return mesh;
}

// A spec of `rank` entries or fewer that uses a random subset of the axes in random order.
PartitionSpec random_spec(std::mt19937& rng, const Mesh& mesh, std::size_t rank) {
  std::vector<std::string> axes = mesh.axis_names();
  std::shuffle(axes.begin(), axes.end(), rng);
  std::vector<std::vector<std::string>> entries(rank);
  for (const std::string& axis : axes) {
    const auto slot = std::uniform_int_distribution<std::size_t>(0, rank)(rng);
    if (slot < rank) entries[slot].push_back(axis);  // slot == rank: axis unused
  }
  const auto length = std::uniform_int_distribution<std::size_t>(0, rank)(rng);
  std::vector<SpecEntry> spec;
  for (std::size_t d = 0; d < rank; ++d) {
    if (d >= length && entries[d].empty()) continue;
    spec.emplace_back(entries[d]);
  }
  while (spec.size() > length && !spec.empty() && spec.back().is_replicated()) spec.pop_back();
  return PartitionSpec(spec);
}

RandomCase random_case(std::mt19937& rng, Evenness evenness) {
  Mesh mesh = random_mesh(rng);
  const auto rank = std::uniform_int_distribution<std::size_t>(0, 3)(rng);
  PartitionSpec spec = random_spec(rng, mesh, rank);
  NamedSharding sharding(mesh, spec, evenness);
  const std::vector<std::int64_t> shards = sharding.num_shards(rank);
  Shape shape(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    if (evenness == Evenness::kStrict) {
      shape[d] = shards[d] * std::uniform_int_distribution<std::int64_t>(0, 3)(rng);
    } else {
      shape[d] = std::uniform_int_distribution<std::int64_t>(0, 2 * shards[d] + 1)(rng);
    }
  }
  return {std::move(sharding), std::move(shape)};
}

bool contains(const ShardIndex& index, const std::vector<std::int64_t>& element) {
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (element[d] < index[d].start || element[d] >= index[d].stop) return false;
  }
  return true;
}

// Calls f on every element coordinate of `shape`.
template <typename F>
void for_each_element(const Shape& shape, F&& f) {
  if (num_elements(shape) == 0) return;
  std::vector<std::int64_t> element(shape.size(), 0);
  while (true) {
    f(element);
    std::size_t d = shape.size();
    while (d > 0 && ++element[d - 1] == shape[d - 1]) element[--d] = 0;
    if (d == 0) return;
  }
}

void check_properties(const RandomCase& c) {
  const NamedSharding& sharding = c.sharding;
  SCOPED_TRACE(sharding.to_string() + " on " + to_string(c.shape));
  const std::vector<DeviceShard> shards = sharding.devices_indices_map(c.shape);
  ASSERT_EQ(static_cast<std::int64_t>(shards.size()), sharding.mesh().size());
  const std::int64_t replicas = sharding.num_replicas();

  // Every element is held by exactly `replicas` devices, once by each replica id.
  for_each_element(c.shape, [&](const std::vector<std::int64_t>& element) {
    std::vector<std::int64_t> holders;
    for (const DeviceShard& shard : shards) {
      if (contains(shard.index, element)) holders.push_back(shard.replica_id);
    }
    ASSERT_EQ(static_cast<std::int64_t>(holders.size()), replicas);
    std::sort(holders.begin(), holders.end());
    for (std::int64_t r = 0; r < replicas; ++r) ASSERT_EQ(holders[static_cast<std::size_t>(r)], r);
  });

  // The shards of each replica id 0..r-1 tile the array: as every element is held once per
  // replica id (above), their sizes adding up to the whole means they do not overlap.
  std::map<std::int64_t, std::int64_t> elements_per_replica;
  for (const DeviceShard& shard : shards) {
    elements_per_replica[shard.replica_id] += num_elements(shape_of(shard.index));
    EXPECT_GE(shard.replica_id, 0);
    if (!is_empty(shard.index)) {
      EXPECT_LT(shard.replica_id, replicas);
    }
  }
  for (std::int64_t replica = 0; replica < replicas; ++replica) {
    EXPECT_EQ(elements_per_replica[replica], num_elements(c.shape)) << "replica " << replica;
  }

  // Each device holds the shard its position names, no larger than shard_shape, and in strict
  // mode exactly shard_shape; replica ids count earlier devices with the same index.
  const Shape shard_shape = sharding.shard_shape(c.shape);
  std::map<std::string, std::int64_t> seen;
  for (const DeviceShard& shard : shards) {
    EXPECT_EQ(sharding.device_index(c.shape, shard.device), shard.index);
    EXPECT_EQ(sharding.replica_id(c.shape, shard.device), shard.replica_id);
    const Shape own = shape_of(shard.index);
    for (std::size_t d = 0; d < own.size(); ++d) EXPECT_LE(own[d], shard_shape[d]);
    if (sharding.evenness() == Evenness::kStrict) {
      EXPECT_EQ(own, shard_shape);
    }
    EXPECT_EQ(shard.replica_id, seen[to_string(shard.index)]++);
  }
}

TEST(NamedShardingProperties, StrictRandomLayouts) {
  std::mt19937 rng(20261129);
  for (int i = 0; i < 600; ++i) check_properties(random_case(rng, Evenness::kStrict));
}

TEST(NamedShardingProperties, UnevenRandomLayouts) {
  std::mt19937 rng(4242);
  for (int i = 0; i < 600; ++i) check_properties(random_case(rng, Evenness::kUneven));
}

TEST(NamedShardingProperties, EquivalenceIsReflexiveAndIgnoresTrailingNone) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    RandomCase c = random_case(rng, Evenness::kStrict);
    const std::size_t rank = c.shape.size();
    EXPECT_TRUE(c.sharding.is_equivalent_to(c.sharding, rank));
    std::vector<SpecEntry> padded = c.sharding.spec().entries();
    padded.resize(rank);
    const NamedSharding longer(c.sharding.mesh(), PartitionSpec(padded));
    EXPECT_TRUE(longer.is_equivalent_to(c.sharding, rank));
    EXPECT_EQ(longer.devices_indices_map(c.shape), c.sharding.devices_indices_map(c.shape));
  }
}

}  // namespace
}  // namespace shardwise

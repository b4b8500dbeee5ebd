#pragma once
// NamedSharding = Mesh + PartitionSpec, with the layout jax.sharding.NamedSharding computes:
// along dimension d with axes (a1..ak) there are size(a1)*...*size(ak) shards, and the
// device at mesh coordinate c holds shard  sum_j c[aj] * prod_{l>j} size(al).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise {

// What happens to a dimension whose size the number of shards does not divide.
enum class Evenness {
  // An error, as in JAX.
  kStrict,
  // torch.chunk semantics: chunk = ceil(size / shards); trailing shards are smaller or empty.
  kUneven,
};

// One device's part of an array.
struct DeviceShard {
  DeviceId device = 0;
  ShardIndex index;
  // How many devices earlier in mesh order hold the same index (as JAX counts it). For shards
  // with elements this runs 0 .. num_replicas()-1; empty shards that share an empty range
  // count one another too.
  std::int64_t replica_id = 0;

  friend bool operator==(const DeviceShard&, const DeviceShard&) = default;
};

class NamedSharding {
 public:
  // Throws ShardingError when the spec names an axis not in the mesh or uses an axis twice.
  NamedSharding(Mesh mesh, PartitionSpec spec, Evenness evenness = Evenness::kStrict);

  [[nodiscard]] const Mesh& mesh() const { return mesh_; }
  [[nodiscard]] const PartitionSpec& spec() const { return spec_; }
  [[nodiscard]] Evenness evenness() const { return evenness_; }

  // Throws ShardingError when the spec is longer than the shape's rank or, when strict, a
  // dimension is not divisible by its number of shards.
  void validate(const Shape& global_shape) const;

  // Number of shards along each of `rank` dimensions.
  [[nodiscard]] std::vector<std::int64_t> num_shards(std::size_t rank) const;
  // Number of devices that hold each shard: the product of the sizes of the unused axes.
  [[nodiscard]] std::int64_t num_replicas() const;
  [[nodiscard]] bool is_fully_replicated() const;

  // The shape of every shard; with uneven sharding, the largest (the first) shard's shape.
  [[nodiscard]] Shape shard_shape(const Shape& global_shape) const;
  [[nodiscard]] ShardIndex device_index(const Shape& global_shape, DeviceId device) const;
  [[nodiscard]] std::int64_t replica_id(const Shape& global_shape, DeviceId device) const;
  // Every device's index and replica id, in mesh order (JAX's devices_indices_map).
  [[nodiscard]] std::vector<DeviceShard> devices_indices_map(const Shape& global_shape) const;

  // True when both shardings put the same part of every rank-`rank` array on every device.
  [[nodiscard]] bool is_equivalent_to(const NamedSharding& other, std::size_t rank) const;

  // "NamedSharding(mesh=Mesh('data': 2), spec=P('data'))".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const NamedSharding&, const NamedSharding&) = default;

 private:
  // Which shard along spec dimension d the device at mesh position p holds.
  [[nodiscard]] std::int64_t shard_coord(std::int64_t position, std::size_t d) const;
  [[nodiscard]] ShardIndex index_at(const Shape& global_shape, std::int64_t position) const;

  Mesh mesh_;
  PartitionSpec spec_;
  Evenness evenness_;
  std::vector<std::int64_t> entry_shards_;  // per spec entry: number of shards
};

inline std::ostream& operator<<(std::ostream& out, const NamedSharding& value) {
  return out << value.to_string();
}

}  // namespace shardwise

template <>
struct std::hash<shardwise::NamedSharding> {
  std::size_t operator()(const shardwise::NamedSharding& sharding) const noexcept;
};

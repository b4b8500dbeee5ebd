#include "shardwise/array/sharded_array.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {

ShardedArray::ShardedArray(NamedSharding sharding, Shape global_shape, DType dtype, Rank rank,
                           std::vector<std::byte> local, std::vector<PartialAxis> partial)
    : sharding_(std::move(sharding)),
      global_shape_(std::move(global_shape)),
      dtype_(dtype),
      rank_(rank),
      local_index_(sharding_.device_index(global_shape_, rank_)),
      local_(std::move(local)),
      partial_(std::move(partial)) {
  const auto expected =
      static_cast<std::size_t>(num_elements(shape_of(local_index_))) * size_in_bytes(dtype_);
  if (local_.size() != expected) {
    throw ShardingError("rank " + std::to_string(rank_) + " block " +
                        shardwise::to_string(local_index_) + " of " + shardwise::to_string(dtype_) +
                        " needs " + std::to_string(expected) + " bytes, got " +
                        std::to_string(local_.size()));
  }
  for (const PartialAxis& p : partial_) {
    if (!sharding_.mesh().has_axis(p.axis)) {
      throw ShardingError("partial axis '" + p.axis + "' is not in " +
                          sharding_.mesh().to_string());
    }
    if (sharding_.spec().dimension_of(p.axis) >= 0) {
      throw ShardingError("axis '" + p.axis + "' is partial and also shards " +
                          sharding_.spec().to_string());
    }
    if (std::count_if(partial_.begin(), partial_.end(),
                      [&](const PartialAxis& q) { return q.axis == p.axis; }) > 1) {
      throw ShardingError("axis '" + p.axis + "' is partial twice");
    }
  }
}

Placements ShardedArray::placements() const {
  Placements placements = to_placements(sharding_.mesh(), sharding_.spec());
  for (const PartialAxis& p : partial_) {
    placements[sharding_.mesh().axis_index(p.axis)] = Partial{p.op};
  }
  return placements;
}

std::string ShardedArray::to_string() const {
  std::string text = "ShardedArray(" + shardwise::to_string(global_shape_) + " " +
                     shardwise::to_string(dtype_) + ", " + sharding_.spec().to_string();
  for (const PartialAxis& p : partial_) {
    text += ", partial " + shardwise::to_string(p.op) + " over '" + p.axis + "'";
  }
  return text + ")";
}

}  // namespace shardwise

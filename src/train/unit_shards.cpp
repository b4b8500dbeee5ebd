#include "unit_shards.hpp"

#include <algorithm>
#include <cstring>

#include "shardwise/core/error.hpp"
#include "shardwise/core/named_sharding.hpp"

namespace shardwise::train::detail {

UnitShards::UnitShards(const ParameterStore& store, const ParameterShardings& shardings,
                       int members)
    : store_(store), members_(members) {
  const std::vector<ParameterSpec>& parameters = store.specs();
  shardings.validate(parameters);
  if (shardings.size != members) {
    throw InvalidArgument("the parameter shardings are for " + std::to_string(shardings.size) +
                          " ranks along '" + shardings.axis + "'; the shard group has " +
                          std::to_string(members));
  }
  const Mesh mesh({shardings.axis}, {shardings.size});
  std::vector<std::size_t> capacity(parameters.size());
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const Shape& shape = parameters[p].shape;
    const NamedSharding sharding(mesh, shardings.specs[p], shardings.evenness);
    Split split;
    split.dimension = shardings.specs[p].dimension_of(shardings.axis);
    if (split.dimension >= 0) {
      const auto d = static_cast<std::size_t>(split.dimension);
      for (std::size_t i = 0; i < d; ++i) split.outer *= static_cast<std::size_t>(shape[i]);
      for (std::size_t i = d + 1; i < shape.size(); ++i) {
        split.inner *= static_cast<std::size_t>(shape[i]);
      }
      split.length = static_cast<std::size_t>(shape[d]);
      for (int m = 0; m < members; ++m) {
        split.ranges.push_back(sharding.device_index(shape, m)[d]);
      }
    }
    capacity[p] = static_cast<std::size_t>(num_elements(sharding.shard_shape(shape)));
    splits_.push_back(std::move(split));
  }
  slots_.resize(parameters.size());
  for (const ParameterUnit& unit : store.units()) {
    std::size_t chunk = 0;
    for (std::size_t p = unit.first; p < unit.end; ++p) {
      slots_[p] = chunk;
      chunk += capacity[p];
    }
    chunk_offsets_.push_back(slice_size_);
    chunks_.push_back(chunk);
    slice_size_ += chunk;
  }
}

std::size_t UnitShards::slice_offset(std::size_t parameter) const {
  return chunk_offsets_[store_.unit_of(parameter)] + slots_[parameter];
}

std::size_t UnitShards::block_elements(std::size_t parameter, int member) const {
  const Split& split = splits_[parameter];
  if (split.dimension < 0) return store_.count(parameter);
  const IndexRange range = split.ranges[static_cast<std::size_t>(member)];
  return split.outer * static_cast<std::size_t>(range.stop - range.start) * split.inner;
}

ShardIndex UnitShards::block_box(std::size_t parameter, int member) const {
  const Shape& shape = store_.specs()[parameter].shape;
  ShardIndex box;
  for (const std::int64_t size : shape) box.push_back({0, size});
  const Split& split = splits_[parameter];
  if (split.dimension >= 0) {
    box[static_cast<std::size_t>(split.dimension)] = split.ranges[static_cast<std::size_t>(member)];
  }
  return box;
}

bool UnitShards::first_copy(std::size_t parameter, int member) const {
  return splits_[parameter].dimension >= 0 || member == 0;
}

void UnitShards::pack(std::size_t unit, int member, const float* full, float* chunk) const {
  const ParameterUnit& u = store_.units()[unit];
  std::fill(chunk, chunk + chunks_[unit], 0.0F);
  for (std::size_t p = u.first; p < u.end; ++p) {
    const float* source = full + (store_.offset(p) - u.offset);
    float* target = chunk + slots_[p];
    for_each_run(p, member, [&](std::size_t from, std::size_t to, std::size_t length) {
      std::memcpy(target + to, source + from, length * sizeof(float));
    });
  }
}

void UnitShards::pack_all(std::size_t unit, const float* full, float* packed) const {
  for (int m = 0; m < members_; ++m) {
    pack(unit, m, full, packed + static_cast<std::size_t>(m) * chunks_[unit]);
  }
}

void UnitShards::unpack(std::size_t unit, const float* packed, float* full) const {
  const ParameterUnit& u = store_.units()[unit];
  for (int m = 0; m < members_; ++m) {
    const float* chunk = packed + static_cast<std::size_t>(m) * chunks_[unit];
    for (std::size_t p = u.first; p < u.end; ++p) {
      if (!first_copy(p, m)) continue;
      float* target = full + (store_.offset(p) - u.offset);
      const float* source = chunk + slots_[p];
      for_each_run(p, m, [&](std::size_t to, std::size_t from, std::size_t length) {
        std::memcpy(target + to, source + from, length * sizeof(float));
      });
    }
  }
}

}  // namespace shardwise::train::detail

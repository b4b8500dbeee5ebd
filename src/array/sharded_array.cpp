#include "shardwise/array/sharded_array.hpp"

#include <algorithm>
#include <cstring>

#include "shardwise/core/error.hpp"

namespace shardwise {

ShardedArray::ShardedArray(NamedSharding sharding, Shape global_shape, DType dtype, Rank rank,
                           std::vector<std::byte> local, std::vector<PartialAxis> partial)
    : sharding_(std::move(sharding)),
      global_shape_(std::move(global_shape)),
      dtype_(dtype),
      rank_(rank),
      local_index_(sharding_.device_index(global_shape_, rank_)),
      owned_(std::move(local)),
      local_(owned_),
      partial_(std::move(partial)) {
  validate();
}

ShardedArray::ShardedArray(ViewTag, NamedSharding sharding, Shape global_shape, DType dtype,
                           Rank rank, std::span<std::byte> storage,
                           std::vector<PartialAxis> partial)
    : sharding_(std::move(sharding)),
      global_shape_(std::move(global_shape)),
      dtype_(dtype),
      rank_(rank),
      local_index_(sharding_.device_index(global_shape_, rank_)),
      local_(storage),
      partial_(std::move(partial)) {
  validate();
}

ShardedArray ShardedArray::view(NamedSharding sharding, Shape global_shape, DType dtype,
                                Rank rank, std::span<std::byte> storage,
                                std::vector<PartialAxis> partial) {
  return ShardedArray(ViewTag{}, std::move(sharding), std::move(global_shape), dtype, rank,
                      storage, std::move(partial));
}

ShardedArray ShardedArray::allocate(NamedSharding sharding, Shape global_shape, DType dtype,
                                    Rank rank, std::vector<PartialAxis> partial) {
  const ShardIndex index = sharding.device_index(global_shape, rank);
  const std::size_t bytes =
      static_cast<std::size_t>(num_elements(shape_of(index))) * size_in_bytes(dtype);
  auto raw = std::make_unique_for_overwrite<std::byte[]>(bytes);
  const std::span<std::byte> storage(raw.get(), bytes);
  ShardedArray array(ViewTag{}, std::move(sharding), std::move(global_shape), dtype, rank, storage,
                     std::move(partial));
  array.raw_ = std::move(raw);
  return array;
}

ShardedArray::ShardedArray(const ShardedArray& other)
    : sharding_(other.sharding_),
      global_shape_(other.global_shape_),
      dtype_(other.dtype_),
      rank_(other.rank_),
      local_index_(other.local_index_),
      owned_(other.owned_),
      local_(other.is_view() ? other.local_ : std::span<std::byte>(owned_)),
      partial_(other.partial_) {
  if (other.raw_) {
    owned_.assign(other.local_.begin(), other.local_.end());
    local_ = owned_;
  }
}

ShardedArray& ShardedArray::operator=(const ShardedArray& other) {
  if (this != &other) *this = ShardedArray(other);
  return *this;
}

// Moving a vector keeps its heap buffer, so an owned block's span stays valid.
ShardedArray::ShardedArray(ShardedArray&& other) noexcept
    : sharding_(std::move(other.sharding_)),
      global_shape_(std::move(other.global_shape_)),
      dtype_(other.dtype_),
      rank_(other.rank_),
      local_index_(std::move(other.local_index_)),
      owned_(std::move(other.owned_)),
      raw_(std::move(other.raw_)),
      local_(other.local_),
      partial_(std::move(other.partial_)) {
  other.local_ = {};
}

ShardedArray& ShardedArray::operator=(ShardedArray&& other) noexcept {
  if (this == &other) return *this;
  sharding_ = std::move(other.sharding_);
  global_shape_ = std::move(other.global_shape_);
  dtype_ = other.dtype_;
  rank_ = other.rank_;
  local_index_ = std::move(other.local_index_);
  owned_ = std::move(other.owned_);
  raw_ = std::move(other.raw_);
  local_ = other.local_;
  partial_ = std::move(other.partial_);
  other.local_ = {};
  return *this;
}

void ShardedArray::validate() const {
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

void ShardedArray::check_element_type(DType wanted, std::size_t size) const {
  if (wanted != dtype_ || size != size_in_bytes(dtype_)) {
    throw ShardingError("local<" + shardwise::to_string(wanted) + ">() of " + to_string() +
                        ": the element type must be the array's dtype");
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

namespace shardwise {
namespace {

float load_float(const std::byte* p, DType dtype) {
  switch (dtype) {
    case DType::kF32: {
      float v = 0;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case DType::kF64: {
      double v = 0;
      std::memcpy(&v, p, sizeof v);
      return static_cast<float>(v);
    }
    case DType::kBF16: {
      BFloat16 v;
      std::memcpy(&v, p, sizeof v);
      return to_float(v);
    }
    default: {
      Float16 v;
      std::memcpy(&v, p, sizeof v);
      return to_float(v);
    }
  }
}

void store_float(std::byte* p, DType dtype, float value, double exact) {
  switch (dtype) {
    case DType::kF32: std::memcpy(p, &value, sizeof value); break;
    case DType::kF64: std::memcpy(p, &exact, sizeof exact); break;
    case DType::kBF16: {
      const BFloat16 v = to_bfloat16(value);
      std::memcpy(p, &v, sizeof v);
      break;
    }
    default: {
      const Float16 v = to_float16(value);
      std::memcpy(p, &v, sizeof v);
      break;
    }
  }
}

}  // namespace

ShardedArray cast(const ShardedArray& array, DType dtype) {
  for (const DType d : {array.dtype(), dtype}) {
    if (!is_floating(d)) {
      throw InvalidArgument("cast from " + to_string(array.dtype()) + " to " + to_string(dtype) +
                            ": casts are between f32, f64, bf16 and f16");
    }
  }
  const std::size_t count = array.local_bytes().size() / size_in_bytes(array.dtype());
  std::vector<std::byte> out(count * size_in_bytes(dtype));
  const std::byte* in = array.local_bytes().data();
  for (std::size_t e = 0; e < count; ++e) {
    const std::byte* from = in + e * size_in_bytes(array.dtype());
    double exact = 0;
    if (array.dtype() == DType::kF64) {
      std::memcpy(&exact, from, sizeof exact);
    } else {
      exact = load_float(from, array.dtype());
    }
    // f64 -> f32 -> 16 bits rounds twice; values exact in f32 (all of bf16's and f16's) do not
    // change by it.
    store_float(out.data() + e * size_in_bytes(dtype), dtype, static_cast<float>(exact), exact);
  }
  return ShardedArray(array.sharding(), array.global_shape(), dtype, array.rank(), std::move(out),
                      array.partial_axes());
}

}  // namespace shardwise

#pragma once
// ShardedArray: a global array laid out over the ranks of a mesh. Each rank holds its own
// block (the index its NamedSharding gives it), row-major, possibly with pending partial
// reductions over some mesh axes (DTensor's Partial: the true value is the reduction of the
// blocks of the ranks along those axes).

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/named_sharding.hpp"

namespace shardwise {

struct PartialAxis {
  std::string axis;
  ReduceOp op = ReduceOp::kSum;
  friend bool operator==(const PartialAxis&, const PartialAxis&) = default;
};

class ShardedArray {
 public:
  // Throws ShardingError when the shape does not fit the sharding, the rank is not a device of
  // the mesh, the buffer has the wrong size, or a partial axis is unknown or also shards.
  ShardedArray(NamedSharding sharding, Shape global_shape, DType dtype, Rank rank,
               std::vector<std::byte> local, std::vector<PartialAxis> partial = {});

  [[nodiscard]] const NamedSharding& sharding() const { return sharding_; }
  [[nodiscard]] const Shape& global_shape() const { return global_shape_; }
  [[nodiscard]] DType dtype() const { return dtype_; }
  [[nodiscard]] Rank rank() const { return rank_; }
  [[nodiscard]] const std::vector<PartialAxis>& partial_axes() const { return partial_; }
  [[nodiscard]] bool is_partial() const { return !partial_.empty(); }

  // This rank's part of the global array and the shape of its block.
  [[nodiscard]] const ShardIndex& local_index() const { return local_index_; }
  [[nodiscard]] Shape local_shape() const { return shape_of(local_index_); }

  [[nodiscard]] std::span<const std::byte> local_bytes() const { return local_; }
  [[nodiscard]] std::span<std::byte> local_bytes() { return local_; }
  template <typename T>
  [[nodiscard]] std::span<const T> local() const {
    return {reinterpret_cast<const T*>(local_.data()), local_.size() / sizeof(T)};
  }
  template <typename T>
  [[nodiscard]] std::span<T> local() {
    return {reinterpret_cast<T*>(local_.data()), local_.size() / sizeof(T)};
  }

  // Placements per mesh axis: Shard/Replicate from the spec, Partial for pending reductions.
  [[nodiscard]] Placements placements() const;
  // "ShardedArray((8, 16) f32, P('data', None), partial sum over 'model')".
  [[nodiscard]] std::string to_string() const;

 private:
  NamedSharding sharding_;
  Shape global_shape_;
  DType dtype_;
  Rank rank_;
  ShardIndex local_index_;
  std::vector<std::byte> local_;
  std::vector<PartialAxis> partial_;
};

}  // namespace shardwise

#pragma once
// ShardedArray: a global array laid out over the ranks of a mesh. Each rank holds its own
// block (the index its NamedSharding gives it), row-major, possibly with pending partial
// reductions over some mesh axes (DTensor's Partial: the true value is the reduction of the
// blocks of the ranks along those axes).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/element_type.hpp"
#include "shardwise/core/half.hpp"
#include "shardwise/core/named_sharding.hpp"

namespace shardwise {

struct PartialAxis {
  std::string axis;
  ReduceOp op = ReduceOp::kSum;
  friend bool operator==(const PartialAxis&, const PartialAxis&) = default;
};

class ShardedArray {
 public:
  // An array that owns its block. Throws ShardingError when the shape does not fit the
  // sharding, the rank is not a device of the mesh, the buffer has the wrong size, or a
  // partial axis is unknown or also shards.
  ShardedArray(NamedSharding sharding, Shape global_shape, DType dtype, Rank rank,
               std::vector<std::byte> local, std::vector<PartialAxis> partial = {});

  // An array whose block is `storage`, memory it does not own (a slice of a flat parameter or
  // gradient buffer, llm.c-style): resharding into it writes there. The storage must hold the
  // block exactly and outlive the array. Copies of a view are views of the same storage.
  static ShardedArray view(NamedSharding sharding, Shape global_shape, DType dtype, Rank rank,
                           std::span<std::byte> storage, std::vector<PartialAxis> partial = {});

  // An array that owns an uninitialised block, for a caller that writes every byte of it.
  static ShardedArray allocate(NamedSharding sharding, Shape global_shape, DType dtype, Rank rank,
                               std::vector<PartialAxis> partial = {});

  ShardedArray(const ShardedArray& other);
  ShardedArray& operator=(const ShardedArray& other);
  ShardedArray(ShardedArray&& other) noexcept;
  ShardedArray& operator=(ShardedArray&& other) noexcept;
  ~ShardedArray() = default;

  [[nodiscard]] bool is_view() const { return owned_.empty() && !raw_ && !local_.empty(); }

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
  // The block as elements of T, which must be the array's dtype (ShardingError otherwise).
  template <typename T>
  [[nodiscard]] std::span<const T> local() const {
    check_element_type(dtype_of<T>(), sizeof(T));
    return {reinterpret_cast<const T*>(local_.data()), local_.size() / sizeof(T)};
  }
  template <typename T>
  [[nodiscard]] std::span<T> local() {
    check_element_type(dtype_of<T>(), sizeof(T));
    return {reinterpret_cast<T*>(local_.data()), local_.size() / sizeof(T)};
  }

  // Placements per mesh axis: Shard/Replicate from the spec, Partial for pending reductions.
  [[nodiscard]] Placements placements() const;
  // "ShardedArray((8, 16) f32, P('data', None), partial sum over 'model')".
  [[nodiscard]] std::string to_string() const;

 private:
  struct ViewTag {};
  ShardedArray(ViewTag, NamedSharding sharding, Shape global_shape, DType dtype, Rank rank,
               std::span<std::byte> storage, std::vector<PartialAxis> partial);
  void check_element_type(DType wanted, std::size_t size) const;
  void validate() const;

  NamedSharding sharding_;
  Shape global_shape_;
  DType dtype_;
  Rank rank_;
  ShardIndex local_index_;
  std::vector<std::byte> owned_;
  std::unique_ptr<std::byte[]> raw_;  // an owned block that allocate() left uninitialised
  // The block: owned_'s bytes, or the storage of a view.
  std::span<std::byte> local_;
  std::vector<PartialAxis> partial_;
};

// The same array in another floating dtype (f32, f64, bf16, f16), element by element, rounding
// to nearest even; pending partial reductions stay pending. Throws InvalidArgument for other
// dtypes.
ShardedArray cast(const ShardedArray& array, DType dtype);

}  // namespace shardwise

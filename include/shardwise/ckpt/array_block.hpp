#pragma once
// A rank's block of a global array, as a checkpoint saves or loads it: the array's name, global
// shape and dtype, the block's box in it, and the block's bytes, row-major.

#include <cstddef>
#include <span>
#include <string>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise::ckpt {

struct BlockToSave {
  std::string array;
  Shape shape;
  DType dtype = DType::kF32;
  std::string sharding;  // in words, for the index
  ShardIndex box;
  std::span<const std::byte> bytes;
};

struct BlockToLoad {
  std::string array;
  Shape shape;
  DType dtype = DType::kF32;
  ShardIndex box;
  std::span<std::byte> bytes;
};

}  // namespace shardwise::ckpt

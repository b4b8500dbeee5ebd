#pragma once
// Copies of rectangular boxes between row-major blocks of a global array.

#include <cstddef>

#include "shardwise/core/shape.hpp"

namespace shardwise::detail {

// Copies the elements of `box` (global coordinates, inside both blocks) from the block whose
// global index is `src_index` to the block whose global index is `dst_index`.
void copy_box(const std::byte* src, const ShardIndex& src_index, std::byte* dst,
              const ShardIndex& dst_index, const ShardIndex& box, std::size_t element_bytes);

}  // namespace shardwise::detail

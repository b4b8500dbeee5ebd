#include <cstring>
#include <vector>

#include "detail/block_copy.hpp"
#include "detail/check.hpp"

namespace shardwise::detail {
namespace {

// Row-major strides, in elements, of a block of this index.
std::vector<std::int64_t> strides_of(const ShardIndex& index) {
  std::vector<std::int64_t> strides(index.size(), 1);
  for (std::size_t d = index.size(); d-- > 1;) strides[d - 1] = strides[d] * index[d].size();
  return strides;
}

}  // namespace

void copy_box(const std::byte* src, const ShardIndex& src_index, std::byte* dst,
              const ShardIndex& dst_index, const ShardIndex& box, std::size_t element_bytes) {
  SHARDWISE_CHECK(src_index.size() == box.size() && dst_index.size() == box.size());
  if (is_empty(box)) return;
  const std::size_t rank = box.size();
  if (rank == 0) {
    std::memcpy(dst, src, element_bytes);
    return;
  }
  const std::vector<std::int64_t> src_strides = strides_of(src_index);
  const std::vector<std::int64_t> dst_strides = strides_of(dst_index);
  // Trailing dimensions that the box, the source and the target all span whole are one
  // contiguous run: copy them with one memcpy instead of one per row.
  std::size_t inner = rank - 1;
  std::int64_t run_elements = box[rank - 1].size();
  while (inner > 0 && box[inner] == src_index[inner] && box[inner] == dst_index[inner]) {
    --inner;
    run_elements *= box[inner].size();
  }
  const auto run = static_cast<std::size_t>(run_elements) * element_bytes;
  std::vector<std::int64_t> at(rank);  // global coordinates of the current run's start
  for (std::size_t d = 0; d < rank; ++d) at[d] = box[d].start;
  while (true) {
    std::int64_t src_offset = 0;
    std::int64_t dst_offset = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      src_offset += (at[d] - src_index[d].start) * src_strides[d];
      dst_offset += (at[d] - dst_index[d].start) * dst_strides[d];
    }
    std::memcpy(dst + static_cast<std::size_t>(dst_offset) * element_bytes,
                src + static_cast<std::size_t>(src_offset) * element_bytes, run);
    // Next run: advance the coordinates before dimension `inner`, odometer style.
    std::size_t d = inner;
    while (d > 0) {
      --d;
      if (++at[d] < box[d].stop) break;
      at[d] = box[d].start;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

}  // namespace shardwise::detail

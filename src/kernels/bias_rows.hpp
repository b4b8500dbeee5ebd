#pragma once
// A linear layer's output starts as its bias in every row, so that the product adds onto it.

#include <algorithm>
#include <cstddef>

#include "parallel.hpp"

namespace shardwise::kernels::detail {

inline void fill_rows_with_bias(float* out, const float* bias, std::size_t rows,
                                std::size_t columns) {
  parallel_for(rows, 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) std::copy(bias, bias + columns, out + r * columns);
  });
}

}  // namespace shardwise::kernels::detail

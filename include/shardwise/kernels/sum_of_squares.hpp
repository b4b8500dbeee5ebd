#pragma once
// The sum of x[i]^2 over `count` floats, in double: the global gradient norm's part of one rank.
// Summed in fixed blocks of 16384 elements, each in 16 lanes combined in a fixed order, and the
// blocks in order: the result depends neither on the thread count nor on the vector width. The
// blocks are split among the calling thread's OpenMP threads (set_blas_threads).

#include <cstddef>

namespace shardwise::kernels {

double sum_of_squares(const float* x, std::size_t count);

}  // namespace shardwise::kernels

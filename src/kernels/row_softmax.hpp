#pragma once
// The softmax's steps over one row, shared by the cross-entropy (a row of the vocabulary) and
// the attention (a row of a key tile). Lane-wise (lane_vector.hpp), so they vectorise and
// a row's result depends neither on the machine's vector width nor on the thread count.

#include <cstddef>

namespace shardwise::kernels::detail {

// The largest of x[0, valid), read as x[0, count) with the columns from `valid` on masked (a
// causal row's keys after its query): the loop runs over whole lanes of the row however few
// columns are valid. -inf where none is. valid <= count.
float row_largest(const float* x, std::size_t count, std::size_t valid);

// p = exp(scale x - largest) over [0, valid) and 0 over [valid, count); returns their sum. p
// and x must not overlap. valid <= count. (A scale of 1 gives exp(x - largest) exactly: the
// product is x, and the fused form rounds once.)
float row_exponentials(float* p, const float* x, float largest, std::size_t count,
                       std::size_t valid, float scale = 1.0F);

// The dot product of a and b over [0, count).
float row_dot(const float* a, const float* b, std::size_t count);

}  // namespace shardwise::kernels::detail

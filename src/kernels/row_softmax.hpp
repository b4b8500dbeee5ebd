#pragma once
// The softmax's steps over one row, shared by the cross-entropy (a row of the vocabulary) and
// the attention (a row of a key tile). Lane-wise (fast_math.hpp's kLanes), so they vectorise and
// a row's result depends neither on the machine's vector width nor on the thread count.

#include <cstddef>

namespace shardwise::kernels::detail {

// The largest of x[0, count); -inf for count 0.
float row_largest(const float* x, std::size_t count);

// p = exp(x - largest) over [0, count); returns their sum. p and x must not overlap.
float row_exponentials(float* p, const float* x, float largest, std::size_t count);

// The dot product of a and b over [0, count).
float row_dot(const float* a, const float* b, std::size_t count);

}  // namespace shardwise::kernels::detail

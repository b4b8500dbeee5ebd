#pragma once
// Element-wise reduction of several buffers into one, for every dtype.

#include <cstddef>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/placement.hpp"

namespace shardwise::detail {

// out[e] = inputs[0][e] op inputs[1][e] op ... for e < count. The order is fixed for given
// arguments (where `out` is one of the inputs, that input comes first), so a result is the same
// on every run; each element is reduced by one member only, so members agree bit for bit.
// avg divides the sum by inputs.size(); bf16 and f16 are reduced in f32.
void reduce_into(const std::vector<const void*>& inputs, void* out, std::size_t count, DType dtype,
                 ReduceOp op);

}  // namespace shardwise::detail

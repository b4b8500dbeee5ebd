#pragma once
// The softmax of each row of logits and its cross-entropy against the target, fused. `logits`
// and `probs` are (rows, vocab); `losses` gets one loss per row. Backward adds
// (probs - onehot(target)) * dlosses[row] into dlogits (dlosses: 1 / rows for a mean loss).

#include <cstddef>
#include <cstdint>

namespace shardwise::kernels {

void softmax_cross_entropy_forward(float* losses, float* probs, const float* logits,
                                   const std::int32_t* targets, std::size_t rows,
                                   std::size_t vocab);

void softmax_cross_entropy_backward(float* dlogits, const float* dlosses, const float* probs,
                                    const std::int32_t* targets, std::size_t rows,
                                    std::size_t vocab);

}  // namespace shardwise::kernels

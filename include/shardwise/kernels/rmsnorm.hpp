#pragma once
// RMSNorm over the last dimension (width `channels`) with a weight and no bias, as Llama's
// LlamaRMSNorm: out = inp / sqrt(mean(inp^2) + eps) * weight, the mean in float32. Forward keeps
// each row's reciprocal root mean square for backward, which adds into the weight's gradient.

#include <cstddef>

#include "shardwise/kernels/input_gradient.hpp"

namespace shardwise::kernels {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, float eps,
                     std::size_t rows, std::size_t channels);

// dinp += (or, with kOverwrite, =) the input's gradient; dweight += the weight's.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::size_t rows,
                      std::size_t channels, InputGradient mode = InputGradient::kAccumulate);

}  // namespace shardwise::kernels

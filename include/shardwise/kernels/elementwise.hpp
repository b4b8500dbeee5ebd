#pragma once
// Elementwise pieces of a GPT: the tanh approximation of GELU (as GPT-2 uses it) and the
// residual sum. Backward adds into the gradients.

#include <cstddef>

#include "shardwise/kernels/input_gradient.hpp"

namespace shardwise::kernels {

void gelu_forward(float* out, const float* inp, std::size_t count);
// dinp += (or, with kOverwrite, =) GELU'(inp) dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t count,
                   InputGradient input_gradient = InputGradient::kAccumulate);

// out = a + b; its backward adds dout into both inputs' gradients.
void residual_forward(float* out, const float* a, const float* b, std::size_t count);
void residual_backward(float* da, float* db, const float* dout, std::size_t count);

}  // namespace shardwise::kernels

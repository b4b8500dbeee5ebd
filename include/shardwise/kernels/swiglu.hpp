#pragma once
// Llama's gated MLP activation: out = silu(gate) up, silu(g) = g sigmoid(g).

#include <cstddef>

#include "shardwise/kernels/input_gradient.hpp"

namespace shardwise::kernels {

void swiglu_forward(float* out, const float* gate, const float* up, std::size_t count);
// dgate and dup += (or, with kOverwrite, =) their gradients from dout. dgate may be gate and dup
// may be up (each element is read before its gradients are written): the gradients in place.
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, std::size_t count,
                     InputGradient mode = InputGradient::kAccumulate);

}  // namespace shardwise::kernels

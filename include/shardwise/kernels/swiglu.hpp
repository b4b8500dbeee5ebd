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

// The same over `rows` rows whose gate and up lie side by side (gate_up: rows x 2 width, each
// row its gate then its up, as a Mixture of Experts' fused gate_up product writes them): out rows
// x width. Backward writes (kOverwrite) or adds both gradients into dgate_up, which may be
// gate_up.
void swiglu_rows_forward(float* out, const float* gate_up, std::size_t rows, std::size_t width);
void swiglu_rows_backward(float* dgate_up, const float* dout, const float* gate_up,
                          std::size_t rows, std::size_t width,
                          InputGradient mode = InputGradient::kAccumulate);

}  // namespace shardwise::kernels

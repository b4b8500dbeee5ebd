#pragma once
// A linear layer's products with bf16 operands and float32 accumulation, the products of bf16
// mixed precision: they read bf16 copies of the weights and bf16 activations, and write float32
// (a layer's output before it is rounded, the weights' gradients, added into float32 buffers).
// Row-major as matmul.hpp: `inp` rows x in, `weight` out x in, `out` rows x out. On a CPU with
// bf16 units (AVX512_BF16, AMX) oneDNN's bf16 kernel runs them; elsewhere the operands are
// widened to float32 and run on the float32 products (the same sums, without the units' speed).

#include <cstddef>
#include <span>
#include <string>

#include "shardwise/core/half.hpp"
#include "shardwise/kernels/input_gradient.hpp"

namespace shardwise::kernels {

// Whether this CPU multiplies bf16 in hardware (oneDNN's effective ISA has AVX512_BF16 or AMX),
// and whether the products here use it: tests may turn the units off to check the widened path.
[[nodiscard]] bool bf16_units();
[[nodiscard]] bool bf16_units_used();
void use_bf16_units(bool use);
// Empty where the products use bf16 units; otherwise one sentence for a person: bf16 runs
// emulated here (the roundings widened to float32, the same sums), correct but not faster.
[[nodiscard]] std::string bf16_emulation_note();

// Rounds to nearest, ties to even (NaN stays NaN); `in` and `out` of one size.
void to_bf16(std::span<const float> in, std::span<BFloat16> out);
void to_float(std::span<const BFloat16> in, std::span<float> out);
// Each value becomes its bf16 rounding, kept as a float (to_float of to_bf16, in one pass): an
// output a bf16 product would write, so that keeping it in bf16 later loses nothing.
void round_to_bf16(std::span<float> values);
// The same, each rounding also written to `kept` (of the same size) in one pass.
void round_to_bf16(std::span<float> values, std::span<BFloat16> kept);

// out = inp weight^T + bias (bias may be null).
void matmul_forward_bf16(float* out, const BFloat16* inp, const BFloat16* weight, const float* bias,
                         std::size_t rows, std::size_t in, std::size_t out_features);

// dinp += dout weight (dinp = dout weight with kOverwrite); dweight += dout^T inp; dbias += column
// sums of dout (dbias may be null). dout, inp and weight in bf16; the gradients in float32.
void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                          const BFloat16* inp, const BFloat16* weight, std::size_t rows,
                          std::size_t in, std::size_t out_features,
                          InputGradient input_gradient = InputGradient::kAccumulate);

}  // namespace shardwise::kernels

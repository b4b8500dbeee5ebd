#pragma once
// A linear layer's products with bf16 operands and float32 accumulation, the products of bf16
// mixed precision: they read bf16 copies of the weights and bf16 activations, and write float32
// (a layer's output before it is rounded, the weights' gradients, added into float32 buffers).
// Row-major as matmul.hpp: `inp` rows x in, `weight` out x in, `out` rows x out. On a CPU whose
// bf16 units outrun its float32 FMAs oneDNN's bf16 kernel runs them; elsewhere the operands are
// widened to float32 and run on the float32 products (the same sums, at float32's speed).

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "shardwise/core/half.hpp"
#include "shardwise/kernels/input_gradient.hpp"

namespace shardwise::kernels {

// Whether this CPU multiplies bf16 in hardware (oneDNN's effective ISA has AVX512_BF16 or AMX).
[[nodiscard]] bool bf16_units();
// Whether those units outrun the float32 FMAs: AMX does; AVX512_BF16 does on AMD (Zen 4 issues
// a 512-bit bf16 dot product, 32 products, as often as a 512-bit float32 FMA, 16), not on
// Intel without AMX, where one bf16 dot product issues a cycle against two FMAs and the widened
// float32 products measured 1.4x faster on a whole step (docs/benchmarks.md).
[[nodiscard]] bool bf16_units_faster();
// Whether the products here use the units: by default where they are faster. Tests may turn
// them on or off to check either path (std::nullopt: the default again).
[[nodiscard]] bool bf16_units_used();
void use_bf16_units(std::optional<bool> use);
// Empty where the products use bf16 units; otherwise one sentence for a person: bf16 runs
// emulated here (the roundings widened to float32, the same sums), and why.
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

#pragma once
// What the kernels' loops share: an exp that vectorises, and the attribute that compiles a loop
// for each instruction set the machines have, chosen when the program loads.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace shardwise::kernels::detail {

// e^x in float to about 2 ulp (Cephes' expf: Cody-Waite reduction, a degree-6 polynomial, the
// exponent set through the bits), written so that loops over it vectorise; std::tanh does not,
// and GELU's tanh was a third of a GPT step.
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0F), 88.0F);  // NaN passes through: the result is NaN
  // Rounds to the nearest integer by adding and taking away 1.5 x 2^23 (no call to floor); the
  // integer is then the low bits of `shifted`, read without a float-to-int conversion, which
  // would be undefined for NaN.
  constexpr float kRound = 12582912.0F;
  const float shifted = x * 1.44269504088896341F + kRound;
  const float n = shifted - kRound;
  const std::uint32_t k =
      std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kRound);
  const float r = x - n * 0.693359375F + n * 2.12194440e-4F;
  float p = 1.9875691500E-4F;
  p = p * r + 1.3981999507E-3F;
  p = p * r + 8.3334519073E-3F;
  p = p * r + 4.1665795894E-2F;
  p = p * r + 1.6666665459E-1F;
  p = p * r + 5.0000001201E-1F;
  p = p * r * r + r + 1.0F;
  return p * std::bit_cast<float>((k + 127U) << 23);
}

// Row reductions (LayerNorm's sums, the softmax's largest logit and sum) keep this many partial
// results, lane c % kLanes taking column c, and combine them in a fixed order at the end: the
// loops vectorise (one running sum is a chain of dependent scalar adds), and a row's result does
// not depend on the machine's vector width or on the thread count.
inline constexpr std::size_t kLanes = 16;

}  // namespace shardwise::kernels::detail

// Compiled for AVX-512, AVX2 and baseline x86-64, chosen at load time: this project's machines
// change CPU between sessions. Not under ThreadSanitizer, whose runtime is not up yet when the
// loader runs the clones' resolver.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define SHARDWISE_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SHARDWISE_CPU_CLONES
#endif

#include "shardwise/kernels/elementwise.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

constexpr float kGeluScale = 0.7978845608028654F;  // sqrt(2 / pi)
constexpr float kGeluCube = 0.044715F;

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

inline float fast_tanh(float u) { return 1.0F - 2.0F / (fast_exp(2.0F * u) + 1.0F); }

}  // namespace

// Compiled for AVX-512, AVX2 and baseline x86-64, chosen at load time: this project's machines
// change CPU between sessions. Not under ThreadSanitizer, whose runtime is not up yet when the
// loader runs the clones' resolver.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define SHARDWISE_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SHARDWISE_CPU_CLONES
#endif

namespace {

// Elements per thread at least: below this a team costs more than it saves.
constexpr std::size_t kElementsPerThread = std::size_t{1} << 14;

SHARDWISE_CPU_CLONES
void gelu_forward_range(float* __restrict out, const float* __restrict inp, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    out[i] = 0.5F * x * (1.0F + fast_tanh(kGeluScale * (x + kGeluCube * x * x * x)));
  }
}

SHARDWISE_CPU_CLONES
void gelu_backward_range(float* __restrict dinp, const float* __restrict inp,
                         const float* __restrict dout, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCube * x * x * x);
    const float th = fast_tanh(u);
    const float sech2 = 1.0F - th * th;
    const float local =
        0.5F * (1.0F + th) + 0.5F * x * sech2 * kGeluScale * (1.0F + 3.0F * kGeluCube * x * x);
    dinp[i] += local * dout[i];
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t count) {
  detail::parallel_for(count, kElementsPerThread, [&](std::size_t first, std::size_t last) {
    gelu_forward_range(out + first, inp + first, last - first);
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t count) {
  detail::parallel_for(count, kElementsPerThread, [&](std::size_t first, std::size_t last) {
    gelu_backward_range(dinp + first, inp + first, dout + first, last - first);
  });
}

void residual_forward(float* out, const float* a, const float* b, std::size_t count) {
  detail::parallel_for(count, kElementsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) out[i] = a[i] + b[i];
  });
}

void residual_backward(float* da, float* db, const float* dout, std::size_t count) {
  detail::parallel_for(count, kElementsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      da[i] += dout[i];
      db[i] += dout[i];
    }
  });
}

}  // namespace shardwise::kernels

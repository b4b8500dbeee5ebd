#include "shardwise/kernels/elementwise.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "fast_math.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

constexpr float kGeluScale = 0.7978845608028654F;  // sqrt(2 / pi)
constexpr float kGeluCube = 0.044715F;

inline float fast_tanh(float u) { return 1.0F - 2.0F / (detail::fast_exp(2.0F * u) + 1.0F); }

}  // namespace

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

// Inlined into the cloned loops below, which it must be to vectorise: a target_clones function
// of its own is called through the loader's resolver once per element (it was an eighth of a
// tiny model's step).
[[gnu::always_inline]] inline float gelu_derivative(float x) {
  const float u = kGeluScale * (x + kGeluCube * x * x * x);
  const float th = fast_tanh(u);
  const float sech2 = 1.0F - th * th;
  return 0.5F * (1.0F + th) + 0.5F * x * sech2 * kGeluScale * (1.0F + 3.0F * kGeluCube * x * x);
}

// Two loops, so that each vectorises: one adds, one writes.
SHARDWISE_CPU_CLONES
void gelu_backward_range(float* __restrict dinp, const float* __restrict inp,
                         const float* __restrict dout, std::size_t count, bool add) {
  if (add) {
    for (std::size_t i = 0; i < count; ++i) dinp[i] += gelu_derivative(inp[i]) * dout[i];
  } else {
    for (std::size_t i = 0; i < count; ++i) dinp[i] = gelu_derivative(inp[i]) * dout[i];
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t count) {
  detail::parallel_for(count, kElementsPerThread, [&](std::size_t first, std::size_t last) {
    gelu_forward_range(out + first, inp + first, last - first);
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t count,
                   InputGradient input_gradient) {
  const bool add = input_gradient == InputGradient::kAccumulate;
  detail::parallel_for(count, kElementsPerThread, [&](std::size_t first, std::size_t last) {
    gelu_backward_range(dinp + first, inp + first, dout + first, last - first, add);
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

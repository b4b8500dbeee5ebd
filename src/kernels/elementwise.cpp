#include "shardwise/kernels/elementwise.hpp"

#include <cmath>

namespace shardwise::kernels {
namespace {

constexpr float kGeluScale = 0.7978845608028654F;  // sqrt(2 / pi)
constexpr float kGeluCube = 0.044715F;

}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    out[i] = 0.5F * x * (1.0F + std::tanh(kGeluScale * (x + kGeluCube * x * x * x)));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCube * x * x * x);
    const float th = std::tanh(u);
    const float sech2 = 1.0F - th * th;
    const float local =
        0.5F * (1.0F + th) + 0.5F * x * sech2 * kGeluScale * (1.0F + 3.0F * kGeluCube * x * x);
    dinp[i] += local * dout[i];
  }
}

void residual_forward(float* out, const float* a, const float* b, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

}  // namespace shardwise::kernels

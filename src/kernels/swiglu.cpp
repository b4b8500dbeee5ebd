#include "shardwise/kernels/swiglu.hpp"

#include <cmath>

#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

float sigmoid(float x) { return 1.0F / (1.0F + std::exp(-x)); }

}  // namespace

void swiglu_forward(float* out, const float* gate, const float* up, std::size_t count) {
  detail::parallel_for(count, 4096, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) out[i] = gate[i] * sigmoid(gate[i]) * up[i];
  });
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, std::size_t count, InputGradient mode) {
  const bool overwrite = mode == InputGradient::kOverwrite;
  detail::parallel_for(count, 4096, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      const float g = gate[i], s = sigmoid(g);
      const float dg = dout[i] * up[i] * s * (1.0F + g * (1.0F - s));
      const float du = dout[i] * g * s;
      dgate[i] = overwrite ? dg : dgate[i] + dg;
      dup[i] = overwrite ? du : dup[i] + du;
    }
  });
}

}  // namespace shardwise::kernels

#include "shardwise/kernels/swiglu.hpp"

#include <algorithm>
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

void swiglu_rows_forward(float* out, const float* gate_up, std::size_t rows, std::size_t width) {
  detail::parallel_for(rows, std::max<std::size_t>(1, 4096 / std::max<std::size_t>(width, 1)),
                       [&](std::size_t first, std::size_t last) {
                         for (std::size_t r = first; r < last; ++r) {
                           const float* gate = gate_up + r * 2 * width;
                           swiglu_forward(out + r * width, gate, gate + width, width);
                         }
                       });
}

void swiglu_rows_backward(float* dgate_up, const float* dout, const float* gate_up,
                          std::size_t rows, std::size_t width, InputGradient mode) {
  detail::parallel_for(rows, std::max<std::size_t>(1, 4096 / std::max<std::size_t>(width, 1)),
                       [&](std::size_t first, std::size_t last) {
                         for (std::size_t r = first; r < last; ++r) {
                           const float* gate = gate_up + r * 2 * width;
                           float* dgate = dgate_up + r * 2 * width;
                           swiglu_backward(dgate, dgate + width, dout + r * width, gate,
                                           gate + width, width, mode);
                         }
                       });
}

}  // namespace shardwise::kernels

#include "shardwise/kernels/rmsnorm.hpp"

#include <cmath>

#include "parallel.hpp"

namespace shardwise::kernels {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, float eps,
                     std::size_t rows, std::size_t channels) {
  detail::parallel_for(rows, 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* x = inp + r * channels;
      float* y = out + r * channels;
      float squares = 0;
      for (std::size_t c = 0; c < channels; ++c) squares += x[c] * x[c];
      const float s = 1.0F / std::sqrt(squares / static_cast<float>(channels) + eps);
      for (std::size_t c = 0; c < channels; ++c) y[c] = x[c] * s * weight[c];
      rstd[r] = s;
    }
  });
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::size_t rows,
                      std::size_t channels, InputGradient mode) {
  // The weight's gradient sums over every row: one pass in row order, so that the sum does not
  // depend on the thread count.
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = inp + r * channels;
    const float* dy = dout + r * channels;
    for (std::size_t c = 0; c < channels; ++c) dweight[c] += dy[c] * x[c] * rstd[r];
  }
  const bool overwrite = mode == InputGradient::kOverwrite;
  detail::parallel_for(rows, 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* x = inp + r * channels;
      const float* dy = dout + r * channels;
      float* dx = dinp + r * channels;
      const float s = rstd[r];
      // d(x s) = s (g - x s^2 mean(g x)), g = dout weight.
      float dot = 0;
      for (std::size_t c = 0; c < channels; ++c) dot += dy[c] * weight[c] * x[c];
      const float k = s * s * dot / static_cast<float>(channels);
      for (std::size_t c = 0; c < channels; ++c) {
        const float g = s * (dy[c] * weight[c] - x[c] * k);
        dx[c] = overwrite ? g : dx[c] + g;
      }
    }
  });
}

}  // namespace shardwise::kernels

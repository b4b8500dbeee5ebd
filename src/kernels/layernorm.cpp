#include "shardwise/kernels/layernorm.hpp"

#include <cmath>

#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

// Fewer rows or columns than these per thread cost more to hand out than they save.
constexpr std::size_t kRowsPerThread = 64;
constexpr std::size_t kColumnsPerThread = 32;

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::size_t rows, std::size_t channels) {
  const auto n = static_cast<float>(channels);
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* x = inp + r * channels;
      float sum = 0.0F;
      for (std::size_t c = 0; c < channels; ++c) sum += x[c];
      const float m = sum / n;
      float var = 0.0F;
      for (std::size_t c = 0; c < channels; ++c) var += (x[c] - m) * (x[c] - m);
      const float s = 1.0F / std::sqrt(var / n + kLayerNormEps);
      float* y = out + r * channels;
      for (std::size_t c = 0; c < channels; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
      mean[r] = m;
      rstd[r] = s;
    }
  });
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::size_t rows, std::size_t channels) {
  const auto n = static_cast<float>(channels);
  // The input's gradient row by row; the weight's and bias's column by column (each column's
  // sum over the rows in row order, whatever the threads).
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* x = inp + r * channels;
      const float* dy = dout + r * channels;
      float* dx = dinp + r * channels;
      const float m = mean[r];
      const float s = rstd[r];
      // The two means the input gradient needs: of dnorm, and of dnorm times norm.
      float dnorm_mean = 0.0F;
      float dnorm_norm_mean = 0.0F;
      for (std::size_t c = 0; c < channels; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = weight[c] * dy[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
      }
      dnorm_mean /= n;
      dnorm_norm_mean /= n;
      for (std::size_t c = 0; c < channels; ++c) {
        const float norm = (x[c] - m) * s;
        dx[c] += (weight[c] * dy[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
      }
    }
  });
  detail::parallel_for(channels, kColumnsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* x = inp + r * channels;
      const float* dy = dout + r * channels;
      const float m = mean[r];
      const float s = rstd[r];
      for (std::size_t c = first; c < last; ++c) {
        dbias[c] += dy[c];
        dweight[c] += (x[c] - m) * s * dy[c];
      }
    }
  });
}

}  // namespace shardwise::kernels

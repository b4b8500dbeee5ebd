#include "shardwise/kernels/layernorm.hpp"

#include <cmath>

namespace shardwise::kernels {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::size_t rows, std::size_t channels) {
  const auto n = static_cast<float>(channels);
  for (std::size_t r = 0; r < rows; ++r) {
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
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::size_t rows, std::size_t channels) {
  const auto n = static_cast<float>(channels);
  for (std::size_t r = 0; r < rows; ++r) {
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
      const float dnorm = weight[c] * dy[c];
      dbias[c] += dy[c];
      dweight[c] += norm * dy[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

}  // namespace shardwise::kernels

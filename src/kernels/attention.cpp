#include "shardwise/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gemm.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {

// Per (sequence, head), on the BLAS: scores = q k^T (the masked half is computed and then
// zeroed: a product on the BLAS beats the scalar loops that would skip it), a causal softmax
// per row, out = weights v. q, k and v are strided views of qkv (row stride 3 channels).
void attention_forward(float* out, float* att, const float* qkv, std::size_t batch, std::size_t seq,
                       std::size_t channels, std::size_t heads) {
  const std::size_t head_size = channels / heads;
  const std::size_t row = 3 * channels;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  // Every (sequence, head) on its own, the threads taking a share of them each (the products
  // inside then run on one thread).
  detail::parallel_for(batch * heads, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t b = i / heads;
      const std::size_t h = i % heads;
      const float* q = qkv + b * seq * row + h * head_size;
      const float* k = q + channels;
      const float* v = q + 2 * channels;
      float* weights = att + i * seq * seq;
      detail::sgemm(false, true, seq, seq, head_size, scale, q, row, k, row, 0.0F, weights, seq);
      for (std::size_t t = 0; t < seq; ++t) {
        float* w = weights + t * seq;
        const float largest = *std::max_element(w, w + t + 1);
        float sum = 0.0F;
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          w[t2] = std::exp(w[t2] - largest);
          sum += w[t2];
        }
        const float inverse = 1.0F / sum;  // sum >= 1: the largest term is exp(0)
        for (std::size_t t2 = 0; t2 <= t; ++t2) w[t2] *= inverse;
        std::fill(w + t + 1, w + seq, 0.0F);
      }
      detail::sgemm(false, false, seq, head_size, seq, 1.0F, weights, seq, v, row, 0.0F,
                    out + b * seq * channels + h * head_size, channels);
    }
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        std::size_t batch, std::size_t seq, std::size_t channels,
                        std::size_t heads) {
  const std::size_t head_size = channels / heads;
  const std::size_t row = 3 * channels;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  detail::parallel_for(batch * heads, 1, [&](std::size_t first, std::size_t last) {
    std::vector<float> dweights(seq * seq);
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t b = i / heads;
      const std::size_t h = i % heads;
      const float* q = qkv + b * seq * row + h * head_size;
      const float* k = q + channels;
      const float* v = q + 2 * channels;
      float* dq = dqkv + b * seq * row + h * head_size;
      float* dk = dq + channels;
      float* dv = dq + 2 * channels;
      const float* dy = dout + b * seq * channels + h * head_size;
      const float* weights = att + i * seq * seq;
      // Through out = weights v.
      detail::sgemm(true, false, seq, head_size, seq, 1.0F, weights, seq, dy, channels, 1.0F, dv,
                    row);
      detail::sgemm(false, true, seq, seq, head_size, 1.0F, dy, channels, v, row, 0.0F,
                    dweights.data(), seq);
      // Through the softmax: d scores = weights (d weights - sum weights d weights), scaled;
      // zero above the diagonal, where the weights are zero.
      for (std::size_t t = 0; t < seq; ++t) {
        const float* w = weights + t * seq;
        float* d = dweights.data() + t * seq;
        float weighted = 0.0F;
        for (std::size_t t2 = 0; t2 <= t; ++t2) weighted += w[t2] * d[t2];
        for (std::size_t t2 = 0; t2 <= t; ++t2) d[t2] = w[t2] * (d[t2] - weighted) * scale;
        std::fill(d + t + 1, d + seq, 0.0F);
      }
      // Through scores = q k^T.
      detail::sgemm(false, false, seq, head_size, seq, 1.0F, dweights.data(), seq, k, row, 1.0F, dq,
                    row);
      detail::sgemm(true, false, seq, head_size, seq, 1.0F, dweights.data(), seq, q, row, 1.0F, dk,
                    row);
    }
  });
}

}  // namespace shardwise::kernels

#include "shardwise/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace shardwise::kernels {

void attention_forward(float* out, float* att, const float* qkv, std::size_t batch,
                       std::size_t seq, std::size_t channels, std::size_t heads) {
  const std::size_t head_size = channels / heads;
  const std::size_t row = 3 * channels;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < seq; ++t) {
      for (std::size_t h = 0; h < heads; ++h) {
        const float* q = qkv + (b * seq + t) * row + h * head_size;
        float* weights = att + ((b * heads + h) * seq + t) * seq;
        float largest = -std::numeric_limits<float>::infinity();
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (b * seq + t2) * row + channels + h * head_size;
          float dot = 0.0F;
          for (std::size_t i = 0; i < head_size; ++i) dot += q[i] * k[i];
          weights[t2] = dot * scale;
          largest = std::max(largest, weights[t2]);
        }
        float sum = 0.0F;
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          weights[t2] = std::exp(weights[t2] - largest);
          sum += weights[t2];
        }
        const float inverse = 1.0F / sum;  // sum >= 1: the largest term is exp(0)
        for (std::size_t t2 = 0; t2 < seq; ++t2) weights[t2] = t2 <= t ? weights[t2] * inverse : 0.0F;
        float* y = out + (b * seq + t) * channels + h * head_size;
        std::fill(y, y + head_size, 0.0F);
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (b * seq + t2) * row + 2 * channels + h * head_size;
          for (std::size_t i = 0; i < head_size; ++i) y[i] += weights[t2] * v[i];
        }
      }
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        std::size_t batch, std::size_t seq, std::size_t channels,
                        std::size_t heads) {
  const std::size_t head_size = channels / heads;
  const std::size_t row = 3 * channels;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  std::vector<float> datt(seq);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < seq; ++t) {
      for (std::size_t h = 0; h < heads; ++h) {
        const float* weights = att + ((b * heads + h) * seq + t) * seq;
        const float* dy = dout + (b * seq + t) * channels + h * head_size;
        // Through the weighted sum of values.
        float weighted = 0.0F;  // sum over t2 of att * datt, for the softmax below
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (b * seq + t2) * row + 2 * channels + h * head_size;
          float* dv = dqkv + (b * seq + t2) * row + 2 * channels + h * head_size;
          float d = 0.0F;
          for (std::size_t i = 0; i < head_size; ++i) {
            d += v[i] * dy[i];
            dv[i] += weights[t2] * dy[i];
          }
          datt[t2] = d;
          weighted += weights[t2] * d;
        }
        // Through the softmax (d preatt = att (datt - sum att datt)), then the scaled q.k.
        const float* q = qkv + (b * seq + t) * row + h * head_size;
        float* dq = dqkv + (b * seq + t) * row + h * head_size;
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const float dpre = weights[t2] * (datt[t2] - weighted) * scale;
          const float* k = qkv + (b * seq + t2) * row + channels + h * head_size;
          float* dk = dqkv + (b * seq + t2) * row + channels + h * head_size;
          for (std::size_t i = 0; i < head_size; ++i) {
            dq[i] += k[i] * dpre;
            dk[i] += q[i] * dpre;
          }
        }
      }
    }
  }
}

}  // namespace shardwise::kernels

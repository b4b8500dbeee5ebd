#include "shardwise/kernels/cached_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "parallel.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::kernels {

void cached_attention_forward(float* out, const float* q, const float* k, const float* v,
                              const CachedAttentionLayout& layout) {
  const std::size_t heads = layout.heads, kv_heads = layout.kv_heads, d = layout.head_size;
  if (heads == 0 || kv_heads == 0 || heads % kv_heads != 0 || d == 0) {
    throw InvalidArgument("cached attention: " + std::to_string(heads) + " query heads over " +
                          std::to_string(kv_heads) + " key/value heads of size " +
                          std::to_string(d));
  }
  const std::size_t group = heads / kv_heads;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  const std::size_t keys_max = layout.first_position + layout.rows;
  // Each (row, head) pair is one item summed inside itself: the bits do not depend on threads.
  detail::parallel_for(layout.rows * heads, 1, [&](std::size_t first, std::size_t last) {
    std::vector<float> weights(keys_max);
    for (std::size_t item = first; item < last; ++item) {
      const std::size_t row = item / heads, h = item % heads, kvh = h / group;
      const std::size_t keys = layout.first_position + row + 1;
      const float* query = q + row * layout.q_stride + h * d;
      float largest = -INFINITY;
      for (std::size_t j = 0; j < keys; ++j) {
        const float* key = k + j * layout.kv_stride + kvh * d;
        float dot = 0;
        for (std::size_t c = 0; c < d; ++c) dot += query[c] * key[c];
        weights[j] = dot * scale;
        largest = std::max(largest, weights[j]);
      }
      float sum = 0;
      for (std::size_t j = 0; j < keys; ++j) {
        weights[j] = std::exp(weights[j] - largest);
        sum += weights[j];
      }
      float* o = out + row * heads * d + h * d;
      std::fill(o, o + d, 0.0F);
      for (std::size_t j = 0; j < keys; ++j) {
        const float* value = v + j * layout.kv_stride + kvh * d;
        const float w = weights[j] / sum;
        for (std::size_t c = 0; c < d; ++c) o[c] += w * value[c];
      }
    }
  });
}

}  // namespace shardwise::kernels

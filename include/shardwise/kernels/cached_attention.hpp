#pragma once
// Causal attention of a decoder's new positions against its key/value cache: one sequence whose
// first `first_position` positions' keys and values are cached, `rows` new queries (positions
// first_position .. first_position + rows - 1) whose keys and values the caller has appended to
// the cache already. Query row i attends to keys [0, first_position + i]; grouped-query heads as
// attention.hpp's AttentionLayout: query head h reads key/value head h / (heads / kv_heads).
// Scores are scaled by 1 / sqrt(head_size) and softmaxed in float32 with exact exponentials.

#include <cstddef>

namespace shardwise::kernels {

struct CachedAttentionLayout {
  std::size_t first_position = 0;  // positions cached before the new rows
  std::size_t rows = 0;            // new queries
  std::size_t heads = 0;
  std::size_t kv_heads = 0;
  std::size_t head_size = 0;
  std::size_t q_stride = 0;   // floats between query rows
  std::size_t kv_stride = 0;  // floats between cached positions
};

// out (rows, heads head_size, dense) from q (rows, q_stride) and the caches k and v (positions,
// kv_stride; at least first_position + rows of them).
void cached_attention_forward(float* out, const float* q, const float* k, const float* v,
                              const CachedAttentionLayout& layout);

}  // namespace shardwise::kernels

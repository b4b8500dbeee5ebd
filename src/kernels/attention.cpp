#include "shardwise/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "amx_product.hpp"
#include "attention_tiles.hpp"
#include "bf16_bits.hpp"
#include "fast_math.hpp"
#include "gemm.hpp"
#include "lane_vector.hpp"
#include "parallel.hpp"
#include "row_softmax.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"

namespace shardwise::kernels {
namespace {

using detail::kKeyTile;
using detail::kQueryTile;

bool on_amx(const AttentionLayout& layout) {
  return layout.bf16 && bf16_units_used() && detail::amx_available();
}

// bf16 without AMX: `rows` rows of `cols` values (row stride `stride`) become their bf16
// roundings, the operands the AMX path multiplies.
SHARDWISE_CPU_CLONES
void round_rows_to_bf16(float* values, std::size_t rows, std::size_t cols, std::size_t stride) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* __restrict row = values + r * stride;
    for (std::size_t c = 0; c < cols; ++c) row[c] = detail::widened(detail::bf16_bits(row[c]));
  }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionLayout& layout) {
  const std::size_t seq = layout.seq, heads = layout.heads, head_size = layout.head_size;
  const std::size_t group = heads / layout.kv_heads;  // query heads per key/value head
  const std::size_t qs = layout.q_stride, ks = layout.kv_stride, os = heads * head_size;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  if (on_amx(layout)) return detail::attention_forward_amx(out, lse, q, k, v, layout);
  detail::parallel_for(layout.batch * heads, 1, [&](std::size_t first, std::size_t last) {
    float* const scores =
        detail::tile_scratch<float>(2 * kQueryTile * kKeyTile + kQueryTile * head_size);
    float* const probs = scores + kQueryTile * kKeyTile;
    float* const acc = probs + kQueryTile * kKeyTile;
    float largest[kQueryTile];
    float sum[kQueryTile];
    float rescale[kQueryTile];
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t b = i / heads;
      const std::size_t h = i % heads;
      const float* qh = q + b * seq * qs + h * head_size;
      const float* kh = k + b * seq * ks + (h / group) * head_size;
      const float* vh = v + b * seq * ks + (h / group) * head_size;
      for (std::size_t q0 = 0; q0 < seq; q0 += kQueryTile) {
        const std::size_t rows = std::min(kQueryTile, seq - q0);
        std::fill(largest, largest + rows, -std::numeric_limits<float>::infinity());
        std::fill(sum, sum + rows, 0.0F);
        std::fill(acc, acc + rows * head_size, 0.0F);
        // Key tiles up to the tile's last query: keys past it are masked for every row.
        for (std::size_t k0 = 0; k0 < q0 + rows; k0 += kKeyTile) {
          const std::size_t cols = std::min(kKeyTile, q0 + rows - k0);
          detail::sgemm(false, true, rows, cols, head_size, scale, qh + q0 * qs, qs, kh + k0 * ks,
                        ks, 0.0F, scores, kKeyTile);
          detail::online_softmax_tile(probs, scores, largest, sum, rescale, rows, cols,
                                      k0 + cols > q0, q0 - k0, 1.0F);
          if (layout.bf16) round_rows_to_bf16(probs, rows, cols, kKeyTile);
          for (std::size_t r = 0; r < rows; ++r) {
            float* a = acc + r * head_size;
            for (std::size_t d = 0; d < head_size; ++d) a[d] *= rescale[r];
          }
          detail::sgemm(false, false, rows, head_size, cols, 1.0F, probs, kKeyTile, vh + k0 * ks,
                        ks, 1.0F, acc, head_size);
        }
        detail::finish_query_tile(out + (b * seq + q0) * os + h * head_size, os, lse + i * seq + q0,
                                  acc, head_size, largest, sum, rows, head_size);
      }
    }
  });
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const AttentionLayout& layout, InputGradient mode) {
  const bool overwrite = mode == InputGradient::kOverwrite;
  const std::size_t seq = layout.seq, heads = layout.heads, head_size = layout.head_size;
  const std::size_t kv_heads = layout.kv_heads, group = heads / kv_heads;
  const std::size_t qs = layout.q_stride, ks = layout.kv_stride, os = heads * head_size;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  if (on_amx(layout)) {
    return detail::attention_backward_amx(dq, dk, dv, dout, q, k, v, out, lse, layout, mode);
  }
  // One (sequence, key/value head) per unit of work: its query heads run one after the other
  // on one thread, so dk and dv of a shared head are summed in a fixed order, never raced.
  detail::parallel_for(layout.batch * kv_heads, 1, [&](std::size_t first, std::size_t last) {
    float* const weights = detail::tile_scratch<float>(2 * kQueryTile * kKeyTile + seq +
                                                       (layout.bf16 ? seq * head_size : 0));
    float* const dweights = weights + kQueryTile * kKeyTile;
    float* const delta = dweights + kQueryTile * kKeyTile;
    float* const rounded_dout = delta + seq;  // bf16: the head's output gradient, rounded
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t b = i / kv_heads;
      const std::size_t g = i % kv_heads;
      const float* kh = k + b * seq * ks + g * head_size;
      const float* vh = v + b * seq * ks + g * head_size;
      float* dkh = dk + b * seq * ks + g * head_size;
      float* dvh = dv + b * seq * ks + g * head_size;
      for (std::size_t h = g * group; h < (g + 1) * group; ++h) {
        const float* qh = q + b * seq * qs + h * head_size;
        float* dqh = dq + b * seq * qs + h * head_size;
        const float* dy = dout + b * seq * os + h * head_size;
        std::size_t dys = os;  // dy's row stride
        if (layout.bf16) {
          for (std::size_t t = 0; t < seq; ++t) {
            std::copy(dy + t * os, dy + t * os + head_size, rounded_dout + t * head_size);
          }
          round_rows_to_bf16(rounded_dout, seq, head_size, head_size);
          dy = rounded_dout;
          dys = head_size;
        }
        const float* y = out + b * seq * os + h * head_size;
        const float* row_lse = lse + (b * heads + h) * seq;
        // The group's first query head writes dk and dv (where asked to); the others add.
        const bool write_keys = overwrite && h == g * group;
        // D = rowsum(dout o out): the softmax backward's sum of weights x dweights, per row.
        for (std::size_t t = 0; t < seq; ++t) {
          delta[t] = detail::row_dot(dy + t * dys, y + t * os, head_size);
        }
        // Key tiles outside, the query tiles from the key tile's first row down inside: dk and
        // dv of a key tile are summed in one place, dq over the key tiles in order. A key tile
        // is cut at the query tile's last key, so each query tile adds the next rows of keys:
        // where the gradient is written, not added, those rows are written (beta 0) and the
        // earlier ones added to. Every query tile meets key tile 0 first, which writes its dq.
        for (std::size_t k0 = 0; k0 < seq; k0 += kKeyTile) {
          std::size_t written = 0;  // rows of this key tile whose dk and dv hold a value
          for (std::size_t q0 = k0; q0 < seq; q0 += kQueryTile) {
            const std::size_t rows = std::min(kQueryTile, seq - q0);
            const std::size_t cols = std::min(kKeyTile, q0 + rows - k0);
            const float queries_beta = overwrite && k0 == 0 ? 0.0F : 1.0F;
            detail::sgemm(false, true, rows, cols, head_size, scale, qh + q0 * qs, qs, kh + k0 * ks,
                          ks, 0.0F, weights, kKeyTile);
            detail::sgemm(false, true, rows, cols, head_size, 1.0F, dy + q0 * dys, dys,
                          vh + k0 * ks, ks, 0.0F, dweights, kKeyTile);
            detail::softmax_backward_tile(weights, dweights, row_lse + q0, delta + q0, rows, cols,
                                          k0 + cols > q0, q0 - k0, scale, 1.0F);
            if (layout.bf16) {
              round_rows_to_bf16(weights, rows, cols, kKeyTile);
              round_rows_to_bf16(dweights, rows, cols, kKeyTile);
            }
            // Through out = weights v, and scores = q k^T: keys [0, before) add to what earlier
            // query tiles gave them, keys [before, cols) get their first terms.
            const std::size_t before = write_keys ? std::min(written, cols) : cols;
            const auto key_rows = [&](std::size_t from, std::size_t to, float beta) {
              if (from == to) return;
              detail::sgemm(true, false, to - from, head_size, rows, 1.0F, weights + from, kKeyTile,
                            dy + q0 * dys, dys, beta, dvh + (k0 + from) * ks, ks);
              detail::sgemm(true, false, to - from, head_size, rows, 1.0F, dweights + from,
                            kKeyTile, qh + q0 * qs, qs, beta, dkh + (k0 + from) * ks, ks);
            };
            key_rows(0, before, 1.0F);
            key_rows(before, cols, 0.0F);
            written = std::max(written, cols);
            detail::sgemm(false, false, rows, head_size, cols, 1.0F, dweights, kKeyTile,
                          kh + k0 * ks, ks, queries_beta, dqh + q0 * qs, qs);
          }
        }
      }
    }
  });
}

namespace {

// GPT-2's packed (batch, seq, 3 channels) q, k and v: one head of keys per head of queries.
AttentionLayout packed_layout(std::size_t batch, std::size_t seq, std::size_t channels,
                              std::size_t heads) {
  return {batch, seq, heads, heads, channels / heads, 3 * channels, 3 * channels};
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq,
                       std::size_t channels, std::size_t heads) {
  attention_forward(out, lse, qkv, qkv + channels, qkv + 2 * channels,
                    packed_layout(batch, seq, channels, heads));
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, std::size_t batch, std::size_t seq, std::size_t channels,
                        std::size_t heads, InputGradient mode) {
  attention_backward(dqkv, dqkv + channels, dqkv + 2 * channels, dout, qkv, qkv + channels,
                     qkv + 2 * channels, out, lse, packed_layout(batch, seq, channels, heads),
                     mode);
}

}  // namespace shardwise::kernels

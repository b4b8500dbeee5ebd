#include "shardwise/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fast_math.hpp"
#include "gemm.hpp"
#include "lane_vector.hpp"
#include "parallel.hpp"
#include "row_softmax.hpp"

namespace shardwise::kernels {
namespace {

// Queries and keys per tile. A tile's scores (64 x 256 floats, 64 KiB) and its rows of q, k and
// v stay in the L2 cache. Keys come in wider tiles than queries because each tile is a matrix
// product of its own, and oneDNN's sgemm has a fixed cost per call: on one thread, q k^T of
// 64 x 256 x 64 ran at 97 GFLOP/s where 64 x 64 x 64 ran at 71. A key tile is cut at the query
// tile's last key, so that no product reaches further past the diagonal than square tiles do.
constexpr std::size_t kQueryTile = 64;
constexpr std::size_t kKeyTile = 256;
static_assert(kKeyTile % kQueryTile == 0, "a key tile starts at a query tile's first row");

// One tile's softmax step, FlashAttention's online form: `probs` (rows x cols, row stride
// kKeyTile) receives exp(score - new row maximum) of `scores`, each row's maximum `largest` and
// running sum `sum` are updated, and `rescale` receives what the row's earlier output must be
// multiplied by. Where `diagonal`, column c of row r is masked when c > r + offset (a key after
// the query).
void online_softmax_tile(float* __restrict probs, const float* __restrict scores,
                         float* __restrict largest, float* __restrict sum,
                         float* __restrict rescale, std::size_t rows, std::size_t cols,
                         bool diagonal, std::size_t offset) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* s = scores + r * kKeyTile;
    float* p = probs + r * kKeyTile;
    const std::size_t valid = diagonal ? std::min(cols, r + offset + 1) : cols;
    const float row_max = std::max(largest[r], detail::row_largest(s, cols, valid));
    const float row_sum = detail::row_exponentials(p, s, row_max, cols, valid);
    // The first tile of a row has largest = -inf: its earlier output and sum are zero.
    const float factor = std::isinf(largest[r]) ? 0.0F : detail::fast_exp(largest[r] - row_max);
    rescale[r] = factor;
    sum[r] = sum[r] * factor + row_sum;
    largest[r] = row_max;
  }
}

// Backward's weights of one tile from the saved log-sum-exp, and the scores' gradient in place of
// the weights' (dscores = weights (dweights - D) scale); masked entries are zero. The loop runs
// over whole lanes of the row, the mask a select, so a diagonal tile's short rows still
// vectorise; a row's last lanes may pass `cols` but stay inside its kKeyTile floats.
SHARDWISE_CPU_CLONES
void softmax_backward_tile(float* __restrict weights, float* __restrict dweights,
                           const float* __restrict lse, const float* __restrict delta,
                           std::size_t rows, std::size_t cols, bool diagonal, std::size_t offset,
                           float scale) {
  using detail::kLanes;
  using detail::LaneVector;
  static_assert(kKeyTile % kLanes == 0, "a row's lanes end inside its tile");
  for (std::size_t r = 0; r < rows; ++r) {
    float* w = weights + r * kKeyTile;
    float* d = dweights + r * kKeyTile;
    const std::size_t valid = diagonal ? std::min(cols, r + offset + 1) : cols;
    const LaneVector row_lse = detail::splat_lanes(lse[r]);
    const LaneVector row_delta = detail::splat_lanes(delta[r]);
    for (std::size_t c = 0; c < cols; c += kLanes) {
      const detail::LaneMask kept = detail::first_lanes(valid > c ? valid - c : 0);
      const LaneVector weight =
          kept ? detail::fast_exp(detail::load_lanes(w + c) - row_lse) : LaneVector{};
      const LaneVector dscore = weight * (detail::load_lanes(d + c) - row_delta) * scale;
      detail::store_lanes(w + c, weight);
      // Selected, not only multiplied by the zero weight: a masked entry is zero whatever its
      // dweight holds (an infinity times zero is NaN).
      detail::store_lanes(d + c, kept ? dscore : LaneVector{});
    }
  }
}

// The calling thread's working memory for the tiles, kept between calls: `floats` floats
// holding what earlier calls left (every use writes before it reads), so a range of the loop
// neither allocates nor zeroes its 144 KiB of tiles.
float* tile_scratch(std::size_t floats) {
  thread_local std::vector<float> storage;
  if (storage.size() < floats) storage.resize(floats);
  return storage.data();
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionLayout& layout) {
  const std::size_t seq = layout.seq, heads = layout.heads, head_size = layout.head_size;
  const std::size_t group = heads / layout.kv_heads;  // query heads per key/value head
  const std::size_t qs = layout.q_stride, ks = layout.kv_stride, os = heads * head_size;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  detail::parallel_for(layout.batch * heads, 1, [&](std::size_t first, std::size_t last) {
    float* const scores = tile_scratch(2 * kQueryTile * kKeyTile + kQueryTile * head_size);
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
          online_softmax_tile(probs, scores, largest, sum, rescale, rows, cols, k0 + cols > q0,
                              q0 - k0);
          for (std::size_t r = 0; r < rows; ++r) {
            float* a = acc + r * head_size;
            for (std::size_t d = 0; d < head_size; ++d) a[d] *= rescale[r];
          }
          detail::sgemm(false, false, rows, head_size, cols, 1.0F, probs, kKeyTile, vh + k0 * ks,
                        ks, 1.0F, acc, head_size);
        }
        for (std::size_t r = 0; r < rows; ++r) {
          const float inverse = 1.0F / sum[r];  // sum >= 1: the largest term is exp(0)
          float* o = out + (b * seq + q0 + r) * os + h * head_size;
          const float* a = acc + r * head_size;
          for (std::size_t d = 0; d < head_size; ++d) o[d] = a[d] * inverse;
          lse[i * seq + q0 + r] = largest[r] + std::log(sum[r]);
        }
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
  // One (sequence, key/value head) per unit of work: its query heads run one after the other
  // on one thread, so dk and dv of a shared head are summed in a fixed order, never raced.
  detail::parallel_for(layout.batch * kv_heads, 1, [&](std::size_t first, std::size_t last) {
    float* const weights = tile_scratch(2 * kQueryTile * kKeyTile + seq);
    float* const dweights = weights + kQueryTile * kKeyTile;
    float* const delta = dweights + kQueryTile * kKeyTile;
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
        const float* y = out + b * seq * os + h * head_size;
        const float* row_lse = lse + (b * heads + h) * seq;
        // The group's first query head writes dk and dv (where asked to); the others add.
        const bool write_keys = overwrite && h == g * group;
        // D = rowsum(dout o out): the softmax backward's sum of weights x dweights, per row.
        for (std::size_t t = 0; t < seq; ++t) {
          delta[t] = detail::row_dot(dy + t * os, y + t * os, head_size);
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
            detail::sgemm(false, true, rows, cols, head_size, 1.0F, dy + q0 * os, os, vh + k0 * ks,
                          ks, 0.0F, dweights, kKeyTile);
            softmax_backward_tile(weights, dweights, row_lse + q0, delta + q0, rows, cols,
                                  k0 + cols > q0, q0 - k0, scale);
            // Through out = weights v, and scores = q k^T: keys [0, before) add to what earlier
            // query tiles gave them, keys [before, cols) get their first terms.
            const std::size_t before = write_keys ? std::min(written, cols) : cols;
            const auto key_rows = [&](std::size_t from, std::size_t to, float beta) {
              if (from == to) return;
              detail::sgemm(true, false, to - from, head_size, rows, 1.0F, weights + from, kKeyTile,
                            dy + q0 * os, os, beta, dvh + (k0 + from) * ks, ks);
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

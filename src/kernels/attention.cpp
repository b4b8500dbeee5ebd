#include "shardwise/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fast_math.hpp"
#include "gemm.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

// Queries and keys per tile: a tile's scores (64 x 64 floats) and its rows of q, k, v stay in
// the L1 and L2 caches.
constexpr std::size_t kTile = 64;

// One tile's softmax step, FlashAttention's online form: `scores` (rows x cols, row stride
// kTile) becomes exp(score - new row maximum), each row's maximum `largest` and running sum
// `sum` are updated, and `rescale` receives what the row's earlier output must be multiplied by.
// Where `diagonal`, column c of row r is masked when c > r + offset (a key after the query).
SHARDWISE_CPU_CLONES
void online_softmax_tile(float* __restrict scores, float* __restrict largest, float* __restrict sum,
                         float* __restrict rescale, std::size_t rows, std::size_t cols,
                         bool diagonal, std::size_t offset) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* s = scores + r * kTile;
    const std::size_t valid = diagonal ? std::min(cols, r + offset + 1) : cols;
    float row_max = largest[r];
    for (std::size_t c = 0; c < valid; ++c) row_max = std::max(row_max, s[c]);
    float row_sum = 0.0F;
    for (std::size_t c = 0; c < valid; ++c) {
      s[c] = detail::fast_exp(s[c] - row_max);
      row_sum += s[c];
    }
    for (std::size_t c = valid; c < cols; ++c) s[c] = 0.0F;
    // The first tile of a row has largest = -inf: its earlier output and sum are zero.
    const float factor = std::isinf(largest[r]) ? 0.0F : detail::fast_exp(largest[r] - row_max);
    rescale[r] = factor;
    sum[r] = sum[r] * factor + row_sum;
    largest[r] = row_max;
  }
}

// Backward's weights of one tile from the saved log-sum-exp, and the scores' gradient in place of
// the weights' (dscores = weights (dweights - D) scale); masked entries are zero.
SHARDWISE_CPU_CLONES
void softmax_backward_tile(float* __restrict weights, float* __restrict dweights,
                           const float* __restrict lse, const float* __restrict delta,
                           std::size_t rows, std::size_t cols, bool diagonal, std::size_t offset,
                           float scale) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* w = weights + r * kTile;
    float* d = dweights + r * kTile;
    const std::size_t valid = diagonal ? std::min(cols, r + offset + 1) : cols;
    for (std::size_t c = 0; c < valid; ++c) {
      w[c] = detail::fast_exp(w[c] - lse[r]);
      d[c] = w[c] * (d[c] - delta[r]) * scale;
    }
    for (std::size_t c = valid; c < cols; ++c) {
      w[c] = 0.0F;
      d[c] = 0.0F;
    }
  }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq,
                       std::size_t channels, std::size_t heads) {
  const std::size_t head_size = channels / heads;
  const std::size_t row = 3 * channels;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  detail::parallel_for(batch * heads, 1, [&](std::size_t first, std::size_t last) {
    std::vector<float> scores(kTile * kTile);
    std::vector<float> acc(kTile * head_size);
    float largest[kTile];
    float sum[kTile];
    float rescale[kTile];
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t b = i / heads;
      const std::size_t h = i % heads;
      const float* q = qkv + b * seq * row + h * head_size;
      const float* k = q + channels;
      const float* v = q + 2 * channels;
      for (std::size_t q0 = 0; q0 < seq; q0 += kTile) {
        const std::size_t rows = std::min(kTile, seq - q0);
        std::fill(largest, largest + rows, -std::numeric_limits<float>::infinity());
        std::fill(sum, sum + rows, 0.0F);
        std::fill(acc.begin(), acc.begin() + static_cast<std::ptrdiff_t>(rows * head_size), 0.0F);
        // Key tiles up to the diagonal's: those past it are masked whole.
        for (std::size_t k0 = 0; k0 < q0 + rows; k0 += kTile) {
          const std::size_t cols = std::min(kTile, seq - k0);
          detail::sgemm(false, true, rows, cols, head_size, scale, q + q0 * row, row, k + k0 * row,
                        row, 0.0F, scores.data(), kTile);
          online_softmax_tile(scores.data(), largest, sum, rescale, rows, cols, k0 + cols > q0,
                              q0 - k0);
          for (std::size_t r = 0; r < rows; ++r) {
            float* a = acc.data() + r * head_size;
            for (std::size_t d = 0; d < head_size; ++d) a[d] *= rescale[r];
          }
          detail::sgemm(false, false, rows, head_size, cols, 1.0F, scores.data(), kTile,
                        v + k0 * row, row, 1.0F, acc.data(), head_size);
        }
        for (std::size_t r = 0; r < rows; ++r) {
          const float inverse = 1.0F / sum[r];  // sum >= 1: the largest term is exp(0)
          float* o = out + (b * seq + q0 + r) * channels + h * head_size;
          const float* a = acc.data() + r * head_size;
          for (std::size_t d = 0; d < head_size; ++d) o[d] = a[d] * inverse;
          lse[i * seq + q0 + r] = largest[r] + std::log(sum[r]);
        }
      }
    }
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, std::size_t batch, std::size_t seq, std::size_t channels,
                        std::size_t heads, InputGradient mode) {
  const bool overwrite = mode == InputGradient::kOverwrite;
  const std::size_t head_size = channels / heads;
  const std::size_t row = 3 * channels;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  detail::parallel_for(batch * heads, 1, [&](std::size_t first, std::size_t last) {
    std::vector<float> weights(kTile * kTile);
    std::vector<float> dweights(kTile * kTile);
    std::vector<float> delta(seq);
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
      const float* y = out + b * seq * channels + h * head_size;
      const float* row_lse = lse + i * seq;
      // D = rowsum(dout o out): the softmax backward's sum of weights x dweights, per row.
      for (std::size_t t = 0; t < seq; ++t) {
        float dot = 0.0F;
        for (std::size_t d = 0; d < head_size; ++d)
          dot += dy[t * channels + d] * y[t * channels + d];
        delta[t] = dot;
      }
      // Key tiles outside, the query tiles at and below the diagonal inside: dk and dv of a key
      // tile are summed in one place, dq over the key tiles in order. Every key tile meets its
      // diagonal query tile first, and every query tile meets key tile 0 first: there a
      // gradient written, not added, sets the block.
      for (std::size_t k0 = 0; k0 < seq; k0 += kTile) {
        const std::size_t cols = std::min(kTile, seq - k0);
        for (std::size_t q0 = k0 / kTile * kTile; q0 < seq; q0 += kTile) {
          const std::size_t rows = std::min(kTile, seq - q0);
          const float keys_beta = overwrite && q0 == k0 ? 0.0F : 1.0F;
          const float queries_beta = overwrite && k0 == 0 ? 0.0F : 1.0F;
          detail::sgemm(false, true, rows, cols, head_size, scale, q + q0 * row, row, k + k0 * row,
                        row, 0.0F, weights.data(), kTile);
          detail::sgemm(false, true, rows, cols, head_size, 1.0F, dy + q0 * channels, channels,
                        v + k0 * row, row, 0.0F, dweights.data(), kTile);
          softmax_backward_tile(weights.data(), dweights.data(), row_lse + q0, delta.data() + q0,
                                rows, cols, k0 + cols > q0, q0 - k0, scale);
          // Through out = weights v, and scores = q k^T.
          detail::sgemm(true, false, cols, head_size, rows, 1.0F, weights.data(), kTile,
                        dy + q0 * channels, channels, keys_beta, dv + k0 * row, row);
          detail::sgemm(false, false, rows, head_size, cols, 1.0F, dweights.data(), kTile,
                        k + k0 * row, row, queries_beta, dq + q0 * row, row);
          detail::sgemm(true, false, cols, head_size, rows, 1.0F, dweights.data(), kTile,
                        q + q0 * row, row, keys_beta, dk + k0 * row, row);
        }
      }
    }
  });
}

}  // namespace shardwise::kernels

// bf16 attention with the tiles' products on AMX (attention.hpp's AttentionLayout::bf16). The
// tiles, their order and the softmax are the float32 path's (attention.cpp); each product's
// operands are packed in bf16 as AMX reads them (amx_product.hpp), once per head where they are
// the head's q, k, v or output gradient, once per tile where they are the tile's weights or
// scores' gradient. Products against keys read k^T, whose pairs along the head are k's own
// adjacent elements; backward's products for dk and dv are computed transposed (dk^T = q^T dS,
// dv^T = dout^T P), so that the tile's weights are packed by pairing adjacent rows, never
// transposed, and each key/value head's dk^T and dv^T are transposed once at its end.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "amx_packing.hpp"
#include "amx_product.hpp"
#include "attention_tiles.hpp"
#include "bf16_bits.hpp"
#include "parallel.hpp"
#include "row_softmax.hpp"

namespace shardwise::kernels::detail {
namespace {

// A head's keys (or values), `rows` x `cols` floats at row stride `stride`, as B of a product
// against their rows (q k^T, dout v^T): rounded into `staging` (rows16 x depth), then
// transposed in pairs into `to` (depth / 2 rows of rows16 words).
void pack_keys_t(std::uint32_t* to, BFloat16* staging, const float* from, std::size_t rows,
                 std::size_t cols, std::size_t stride, std::size_t rows16, std::size_t depth) {
  round_rows(staging, from, rows, cols, stride, rows16, depth, depth);
  transpose_pairs(to, rows16, staging, depth, rows16, depth);
}

// to[r][c] = from[c][r] for r < rows, c < cols (`from` at row stride from_stride), added where
// `add`. Consecutive rows of `to` read the same cache lines of `from` (one per column).
void transpose_into(float* __restrict to, std::size_t to_stride, const float* __restrict from,
                    std::size_t from_stride, std::size_t rows, std::size_t cols, bool add) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = to + r * to_stride;
    for (std::size_t c = 0; c < cols; ++c) {
      const float value = from[c * from_stride + r];
      row[c] = add ? row[c] + value : value;
    }
  }
}

}  // namespace

void attention_forward_amx(float* out, float* lse, const float* q, const float* k, const float* v,
                           const AttentionLayout& layout, TileProduct product) {
  const std::size_t seq = layout.seq, heads = layout.heads, head_size = layout.head_size;
  const std::size_t group = heads / layout.kv_heads;
  const std::size_t qs = layout.q_stride, ks = layout.kv_stride, os = heads * head_size;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  // The padded sizes: q k^T sums over `depth` (the head, to 32); keys are columns of B to 16 and
  // the depth of p v to 32; p v's columns (the head) to 16.
  const std::size_t depth = round_up(head_size, kAmxDepthStep);
  const std::size_t keys16 = round_up(seq, kAmxSide), keys32 = round_up(seq, kAmxDepthStep);
  const std::size_t width = round_up(head_size, kAmxSide);
  parallel_for(layout.batch * heads, 1, [&](std::size_t first, std::size_t last) {
    float* const scores = tile_scratch<float>(2 * kQueryTile * kKeyTile + 2 * kQueryTile * width);
    float* const probs = scores + kQueryTile * kKeyTile;
    float* const acc = probs + kQueryTile * kKeyTile;
    float* const products = acc + kQueryTile * width;
    BFloat16* const queries = tile_scratch<BFloat16>(2 * keys16 * depth + kQueryTile * kKeyTile);
    BFloat16* const staging = queries + keys16 * depth;
    BFloat16* const weights = staging + keys16 * depth;
    std::uint32_t* const keys_t =
        tile_scratch<std::uint32_t>(depth / 2 * keys16 + keys32 / 2 * width);
    std::uint32_t* const values = keys_t + depth / 2 * keys16;
    float largest[kQueryTile];
    float sum[kQueryTile];
    float rescale[kQueryTile];
    // The key/value head whose keys and values are packed: a group's query heads that fall in
    // this thread's range share one packing.
    std::size_t packed_kv_head = std::numeric_limits<std::size_t>::max();
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t b = i / heads;
      const std::size_t h = i % heads;
      const float* qh = q + b * seq * qs + h * head_size;
      round_rows(queries, qh, seq, head_size, qs, keys16, depth, depth);
      if (const std::size_t kv_head = i / group; kv_head != packed_kv_head) {
        const float* kh = k + b * seq * ks + (h / group) * head_size;
        const float* vh = v + b * seq * ks + (h / group) * head_size;
        pack_keys_t(keys_t, staging, kh, seq, head_size, ks, keys16, depth);
        pair_rows(values, vh, seq, head_size, ks, keys32 / 2, width, width);
        packed_kv_head = kv_head;
      }
      for (std::size_t q0 = 0; q0 < seq; q0 += kQueryTile) {
        const std::size_t rows = std::min(kQueryTile, seq - q0);
        std::fill(largest, largest + rows, -std::numeric_limits<float>::infinity());
        std::fill(sum, sum + rows, 0.0F);
        std::fill(acc, acc + rows * width, 0.0F);
        for (std::size_t k0 = 0; k0 < q0 + rows; k0 += kKeyTile) {
          const std::size_t cols = std::min(kKeyTile, q0 + rows - k0);
          const std::size_t cols32 = round_up(cols, kAmxDepthStep);
          product(rows, cols, depth, queries + q0 * depth, depth, keys_t + k0, keys16, false,
                  scores, kKeyTile);
          online_softmax_tile(probs, scores, largest, sum, rescale, rows, cols, k0 + cols > q0,
                              q0 - k0, scale);
          round_rows(weights, probs, rows, cols, kKeyTile, round_up(rows, kAmxSide), cols32,
                     kKeyTile);
          product(rows, head_size, cols32, weights, kKeyTile, values + k0 / 2 * width, width, false,
                  products, width);
          for (std::size_t r = 0; r < rows; ++r) {
            float* a = acc + r * width;
            const float* p = products + r * width;
            for (std::size_t d = 0; d < head_size; ++d) a[d] = a[d] * rescale[r] + p[d];
          }
        }
        finish_query_tile(out + (b * seq + q0) * os + h * head_size, os, lse + i * seq + q0, acc,
                          width, largest, sum, rows, head_size);
      }
    }
  });
}

void attention_backward_amx(float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, const float* out, const float* lse,
                            const AttentionLayout& layout, InputGradient mode,
                            TileProduct product) {
  const bool overwrite = mode == InputGradient::kOverwrite;
  const std::size_t seq = layout.seq, heads = layout.heads, head_size = layout.head_size;
  const std::size_t kv_heads = layout.kv_heads, group = heads / kv_heads;
  const std::size_t qs = layout.q_stride, ks = layout.kv_stride, os = heads * head_size;
  const float scale = 1.0F / std::sqrt(static_cast<float>(head_size));
  const std::size_t depth = round_up(head_size, kAmxDepthStep);
  const std::size_t seq16 = round_up(seq, kAmxSide), seq32 = round_up(seq, kAmxDepthStep);
  const std::size_t width = round_up(head_size, kAmxSide);
  constexpr std::size_t kTile = kQueryTile * kKeyTile;
  parallel_for(layout.batch * kv_heads, 1, [&](std::size_t first, std::size_t last) {
    // Floats: the tile's weights and their gradient, delta, a rounded row, and dk^T, dv^T.
    float* const weights = tile_scratch<float>(2 * kTile + seq + head_size + 2 * width * seq16);
    float* const dweights = weights + kTile;
    float* const delta = dweights + kTile;
    float* const rounded_row = delta + seq;
    float* const keys_grad_t = rounded_row + head_size;
    float* const values_grad_t = keys_grad_t + width * seq16;
    // bf16, row-major: q and dout (A of q k^T and dout v^T), their transposes (A of dk^T, dv^T),
    // the tile's scores' gradient (A of dq).
    BFloat16* const queries = tile_scratch<BFloat16>(3 * seq32 * depth + 2 * width * seq32 + kTile);
    BFloat16* const douts = queries + seq32 * depth;
    BFloat16* const staging = douts + seq32 * depth;
    BFloat16* const queries_t = staging + seq32 * depth;
    BFloat16* const douts_t = queries_t + width * seq32;
    BFloat16* const dscores = douts_t + width * seq32;
    // Pairs: k^T and v^T (B of q k^T and dout v^T), k (B of dq), the tile's weights and scores'
    // gradient paired along queries (B of dv^T and dk^T).
    std::uint32_t* const keys_t =
        tile_scratch<std::uint32_t>(2 * (depth / 2) * seq16 + seq32 / 2 * width + kTile);
    std::uint32_t* const values_t = keys_t + depth / 2 * seq16;
    std::uint32_t* const keys = values_t + depth / 2 * seq16;
    std::uint32_t* const weight_pairs = keys + seq32 / 2 * width;
    std::uint32_t* const dscore_pairs = weight_pairs + kTile / 2;
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t b = i / kv_heads;
      const std::size_t g = i % kv_heads;
      const float* kh = k + b * seq * ks + g * head_size;
      const float* vh = v + b * seq * ks + g * head_size;
      pack_keys_t(keys_t, staging, kh, seq, head_size, ks, seq16, depth);
      pack_keys_t(values_t, staging, vh, seq, head_size, ks, seq16, depth);
      pair_rows(keys, kh, seq, head_size, ks, seq32 / 2, width, width);
      std::fill(keys_grad_t, keys_grad_t + 2 * width * seq16, 0.0F);
      for (std::size_t h = g * group; h < (g + 1) * group; ++h) {
        const float* qh = q + b * seq * qs + h * head_size;
        float* dqh = dq + b * seq * qs + h * head_size;
        const float* dy = dout + b * seq * os + h * head_size;
        const float* y = out + b * seq * os + h * head_size;
        const float* row_lse = lse + (b * heads + h) * seq;
        round_rows(queries, qh, seq, head_size, qs, seq32, depth, depth);
        round_rows(douts, dy, seq, head_size, os, seq32, depth, depth);
        transpose_bf16(queries_t, seq32, queries, depth, seq32, width);
        transpose_bf16(douts_t, seq32, douts, depth, seq32, width);
        // D = rowsum(dout o out) with dout rounded, as every product reads it.
        for (std::size_t t = 0; t < seq; ++t) {
          for (std::size_t d = 0; d < head_size; ++d) {
            rounded_row[d] = widened(douts[t * depth + d].bits);
          }
          delta[t] = row_dot(rounded_row, y + t * os, head_size);
        }
        for (std::size_t k0 = 0; k0 < seq; k0 += kKeyTile) {
          for (std::size_t q0 = k0; q0 < seq; q0 += kQueryTile) {
            const std::size_t rows = std::min(kQueryTile, seq - q0);
            const std::size_t cols = std::min(kKeyTile, q0 + rows - k0);
            const std::size_t rows32 = round_up(rows, kAmxDepthStep);
            const std::size_t cols32 = round_up(cols, kAmxDepthStep);
            product(rows, cols, depth, queries + q0 * depth, depth, keys_t + k0, seq16, false,
                    weights, kKeyTile);
            product(rows, cols, depth, douts + q0 * depth, depth, values_t + k0, seq16, false,
                    dweights, kKeyTile);
            softmax_backward_tile(weights, dweights, row_lse + q0, delta + q0, rows, cols,
                                  k0 + cols > q0, q0 - k0, scale, scale);
            const std::size_t cols16 = round_up(cols, kAmxSide);
            pair_rows(weight_pairs, weights, rows, cols, kKeyTile, rows32 / 2, cols16, kKeyTile);
            pair_rows(dscore_pairs, dweights, rows, cols, kKeyTile, rows32 / 2, cols16, kKeyTile);
            round_rows(dscores, dweights, rows, cols, kKeyTile, round_up(rows, kAmxSide), cols32,
                       kKeyTile);
            // dv^T += dout^T P and dk^T += q^T dS over this tile's queries.
            product(head_size, cols, rows32, douts_t + q0, seq32, weight_pairs, kKeyTile, true,
                    values_grad_t + k0, seq16);
            product(head_size, cols, rows32, queries_t + q0, seq32, dscore_pairs, kKeyTile, true,
                    keys_grad_t + k0, seq16);
            // dq (+)= dS k; every query tile meets key tile 0 first, which writes it.
            product(rows, head_size, cols32, dscores, kKeyTile, keys + k0 / 2 * width, width,
                    !(overwrite && k0 == 0), dqh + q0 * qs, qs);
          }
        }
      }
      float* dkh = dk + b * seq * ks + g * head_size;
      float* dvh = dv + b * seq * ks + g * head_size;
      transpose_into(dkh, ks, keys_grad_t, seq16, seq, head_size, !overwrite);
      transpose_into(dvh, ks, values_grad_t, seq16, seq, head_size, !overwrite);
    }
  });
}

}  // namespace shardwise::kernels::detail

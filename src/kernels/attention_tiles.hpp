#pragma once
// What attention's float32 path (attention.cpp) and its AMX path (attention_amx.cpp) share: the
// tiles' sizes, the softmax's steps on a tile, and each thread's working memory.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "amx_product.hpp"
#include "shardwise/kernels/attention.hpp"

namespace shardwise::kernels::detail {

// Queries and keys per tile. A tile's scores (64 x 256 floats, 64 KiB) and its rows of q, k and
// v stay in the L2 cache. Keys come in wider tiles than queries because each tile is a matrix
// product of its own, and oneDNN's sgemm has a fixed cost per call: on one thread, q k^T of
// 64 x 256 x 64 ran at 97 GFLOP/s where 64 x 64 x 64 ran at 71. A key tile is cut at the query
// tile's last key, so that no product reaches further past the diagonal than square tiles do.
inline constexpr std::size_t kQueryTile = 64;
inline constexpr std::size_t kKeyTile = 256;
static_assert(kKeyTile % kQueryTile == 0, "a key tile starts at a query tile's first row");

// One tile's softmax step, FlashAttention's online form, on the scaled scores score_scale x
// `scores` (rows x cols, row stride kKeyTile): `probs` receives exp(scaled score - new row
// maximum), each row's maximum `largest` (of the scaled scores) and running sum `sum` are
// updated, and `rescale` receives what the row's earlier output must be multiplied by. Where
// `diagonal`, column c of row r is masked when c > r + offset (a key after the query).
void online_softmax_tile(float* probs, const float* scores, float* largest, float* sum,
                         float* rescale, std::size_t rows, std::size_t cols, bool diagonal,
                         std::size_t offset, float score_scale);

// Backward's weights of one tile from the saved log-sum-exp, exp(score_scale x weights - lse),
// written over `weights`, and the scores' gradient written over `dweights`: weights (dweights -
// delta) scale. Masked entries are zero. A row's lanes past `cols` (inside its kKeyTile floats)
// are written too.
void softmax_backward_tile(float* weights, float* dweights, const float* lse, const float* delta,
                           std::size_t rows, std::size_t cols, bool diagonal, std::size_t offset,
                           float scale, float score_scale);

// A query tile's end: its `rows` outputs (row stride out_stride, `head_size` values each) are its
// accumulated sums `acc` (row stride acc_stride) over the softmax's sums, and `lse` (one a row)
// receives each row's log-sum-exp of its scaled scores.
void finish_query_tile(float* out, std::size_t out_stride, float* lse, const float* acc,
                       std::size_t acc_stride, const float* largest, const float* sum,
                       std::size_t rows, std::size_t head_size);

// The calling thread's working memory of type T, kept between calls: `count` elements holding
// what earlier calls left (every use writes before it reads), so a range of attention's loop
// neither allocates nor zeroes its tiles. One buffer per type: a caller carves its arrays of one
// type out of one call.
template <class T>
T* tile_scratch(std::size_t count) {
  thread_local std::vector<T> storage;
  if (storage.size() < count) storage.resize(count);
  return storage.data();
}

// A product on packed bf16 operands, as amx_product computes it (amx_product.hpp).
using TileProduct = void (*)(std::size_t m, std::size_t n, std::size_t depth, const BFloat16* a,
                             std::size_t lda, const std::uint32_t* b, std::size_t ldb,
                             bool accumulate, float* c, std::size_t ldc);

// The AMX path of bf16 attention (layout.bf16 on a machine with AMX): attention_forward's and
// attention_backward's results, with the tiles' products on AMX. Tests give another `product`
// of the same contract to run this path's packing on a machine without AMX (it needs
// AVX512_BF16).
void attention_forward_amx(float* out, float* lse, const float* q, const float* k, const float* v,
                           const AttentionLayout& layout, TileProduct product = amx_product);
void attention_backward_amx(float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, const float* out, const float* lse,
                            const AttentionLayout& layout, InputGradient mode,
                            TileProduct product = amx_product);

}  // namespace shardwise::kernels::detail

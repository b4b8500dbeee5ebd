#include "attention_tiles.hpp"

#include <algorithm>
#include <cmath>

#include "fast_math.hpp"
#include "lane_vector.hpp"
#include "row_softmax.hpp"

namespace shardwise::kernels::detail {

void online_softmax_tile(float* __restrict probs, const float* __restrict scores,
                         float* __restrict largest, float* __restrict sum,
                         float* __restrict rescale, std::size_t rows, std::size_t cols,
                         bool diagonal, std::size_t offset, float score_scale) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* s = scores + r * kKeyTile;
    float* p = probs + r * kKeyTile;
    const std::size_t valid = diagonal ? std::min(cols, r + offset + 1) : cols;
    // The scale is positive, so the scaled row's largest is the scaled largest.
    const float row_max = std::max(largest[r], score_scale * row_largest(s, cols, valid));
    const float row_sum = row_exponentials(p, s, row_max, cols, valid, score_scale);
    // The first tile of a row has largest = -inf: its earlier output and sum are zero.
    const float factor = std::isinf(largest[r]) ? 0.0F : fast_exp(largest[r] - row_max);
    rescale[r] = factor;
    sum[r] = sum[r] * factor + row_sum;
    largest[r] = row_max;
  }
}

// The loop runs over whole lanes of the row, the mask a select, so a diagonal tile's short rows
// still vectorise; a row's last lanes may pass `cols` but stay inside its kKeyTile floats.
SHARDWISE_CPU_CLONES
void softmax_backward_tile(float* __restrict weights, float* __restrict dweights,
                           const float* __restrict lse, const float* __restrict delta,
                           std::size_t rows, std::size_t cols, bool diagonal, std::size_t offset,
                           float scale, float score_scale) {
  static_assert(kKeyTile % kLanes == 0, "a row's lanes end inside its tile");
  const LaneVector factor = splat_lanes(score_scale);
  for (std::size_t r = 0; r < rows; ++r) {
    float* w = weights + r * kKeyTile;
    float* d = dweights + r * kKeyTile;
    const std::size_t valid = diagonal ? std::min(cols, r + offset + 1) : cols;
    const LaneVector row_lse = splat_lanes(lse[r]);
    const LaneVector row_delta = splat_lanes(delta[r]);
    for (std::size_t c = 0; c < cols; c += kLanes) {
      const LaneMask kept = first_lanes(valid > c ? valid - c : 0);
      const LaneVector weight =
          kept ? fast_exp(load_lanes(w + c) * factor - row_lse) : LaneVector{};
      const LaneVector dscore = weight * (load_lanes(d + c) - row_delta) * scale;
      store_lanes(w + c, weight);
      // Selected, not only multiplied by the zero weight: a masked entry is zero whatever its
      // dweight holds (an infinity times zero is NaN).
      store_lanes(d + c, kept ? dscore : LaneVector{});
    }
  }
}

void finish_query_tile(float* out, std::size_t out_stride, float* lse, const float* acc,
                       std::size_t acc_stride, const float* largest, const float* sum,
                       std::size_t rows, std::size_t head_size) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float inverse = 1.0F / sum[r];  // sum >= 1: the largest term is exp(0)
    float* o = out + r * out_stride;
    const float* a = acc + r * acc_stride;
    for (std::size_t d = 0; d < head_size; ++d) o[d] = a[d] * inverse;
    lse[r] = largest[r] + std::log(sum[r]);
  }
}

}  // namespace shardwise::kernels::detail

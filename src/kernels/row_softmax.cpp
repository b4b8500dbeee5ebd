#include "row_softmax.hpp"

#include <limits>

#include "fast_math.hpp"
#include "lane_vector.hpp"

namespace shardwise::kernels::detail {

SHARDWISE_CPU_CLONES
float row_largest(const float* __restrict x, std::size_t count, std::size_t valid) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const std::size_t whole = count - count % kLanes;
  const LaneVector masked = splat_lanes(kMasked);
  LaneVector top = masked;
  for (std::size_t v = 0; v < whole; v += kLanes) {
    const LaneVector kept = first_lanes(valid > v ? valid - v : 0) ? load_lanes(x + v) : masked;
    top = max_lanes(top, kept);
  }
  if (valid > whole) top = max_lanes(top, load_first_lanes(x + whole, valid - whole, kMasked));
  return largest_lane(top);
}

SHARDWISE_CPU_CLONES
float row_exponentials(float* __restrict p, const float* __restrict x, float largest,
                       std::size_t count, std::size_t valid, float scale) {
  const std::size_t whole = count - count % kLanes;
  const LaneVector top = splat_lanes(largest);
  const LaneVector factor = splat_lanes(scale);
  LaneVector sums{};
  for (std::size_t v = 0; v < whole; v += kLanes) {
    // A masked column adds 0, which leaves its lane's sum as it was.
    const LaneVector e = first_lanes(valid > v ? valid - v : 0)
                             ? fast_exp(load_lanes(x + v) * factor - top)
                             : LaneVector{};
    store_lanes(p + v, e);
    sums += e;
  }
  float tail[kLanes] = {};
  for (std::size_t v = whole; v < count; ++v) {
    tail[v - whole] = v < valid ? fast_exp(x[v] * scale - largest) : 0.0F;
    p[v] = tail[v - whole];
  }
  return sum_lanes(sums + load_lanes(tail));
}

SHARDWISE_CPU_CLONES
float row_dot(const float* __restrict a, const float* __restrict b, std::size_t count) {
  const std::size_t whole = count - count % kLanes;
  LaneVector sums{};
  for (std::size_t v = 0; v < whole; v += kLanes) sums += load_lanes(a + v) * load_lanes(b + v);
  const std::size_t rest = count - whole;
  sums += load_first_lanes(a + whole, rest, 0.0F) * load_first_lanes(b + whole, rest, 0.0F);
  return sum_lanes(sums);
}

}  // namespace shardwise::kernels::detail

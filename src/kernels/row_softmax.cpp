#include "row_softmax.hpp"

#include <algorithm>
#include <limits>

#include "fast_math.hpp"

namespace shardwise::kernels::detail {

SHARDWISE_CPU_CLONES
float row_largest(const float* __restrict x, std::size_t count, std::size_t valid) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const std::size_t whole = count - count % kLanes;
  float top[kLanes];
  std::fill(top, top + kLanes, kMasked);
  for (std::size_t v = 0; v < whole; v += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      top[l] = std::max(top[l], v + l < valid ? x[v + l] : kMasked);
    }
  }
  for (std::size_t v = whole; v < valid; ++v) top[v - whole] = std::max(top[v - whole], x[v]);
  float largest = top[0];
  for (const float t : top) largest = std::max(largest, t);
  return largest;
}

SHARDWISE_CPU_CLONES
float row_exponentials(float* __restrict p, const float* __restrict x, float largest,
                       std::size_t count, std::size_t valid) {
  const std::size_t whole = count - count % kLanes;
  float sums[kLanes] = {};
  for (std::size_t v = 0; v < whole; v += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      // A masked column adds 0, which leaves its lane's sum as it was.
      const float e = v + l < valid ? fast_exp(x[v + l] - largest) : 0.0F;
      p[v + l] = e;
      sums[l] += e;
    }
  }
  for (std::size_t v = whole; v < count; ++v) {
    const float e = v < valid ? fast_exp(x[v] - largest) : 0.0F;
    p[v] = e;
    sums[v - whole] += e;
  }
  return sum_lanes(sums);
}

SHARDWISE_CPU_CLONES
float row_dot(const float* __restrict a, const float* __restrict b, std::size_t count) {
  const std::size_t whole = count - count % kLanes;
  float sums[kLanes] = {};
  for (std::size_t v = 0; v < whole; v += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) sums[l] += a[v + l] * b[v + l];
  }
  for (std::size_t v = whole; v < count; ++v) sums[v - whole] += a[v] * b[v];
  return sum_lanes(sums);
}

}  // namespace shardwise::kernels::detail

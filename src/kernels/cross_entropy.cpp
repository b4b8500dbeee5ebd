#include "shardwise/kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fast_math.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

constexpr std::size_t kRowsPerThread = 16;  // each row is a vocabulary of exponentials
// A row's largest logit and its sum of exponentials are kept in this many lanes and combined
// in a fixed order: the loops vectorise, and a row's result does not depend on the threads.
constexpr std::size_t kLanes = 16;

// One row: p = softmax(x); returns log(sum of exp(x - largest)) + largest, the log-sum-exp.
SHARDWISE_CPU_CLONES
float softmax_row(float* __restrict p, const float* __restrict x, std::size_t vocab) {
  const std::size_t whole = vocab - vocab % kLanes;
  float top[kLanes];
  std::fill(top, top + kLanes, -std::numeric_limits<float>::infinity());
  for (std::size_t v = 0; v < whole; v += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) top[l] = std::max(top[l], x[v + l]);
  }
  for (std::size_t v = whole; v < vocab; ++v) top[v - whole] = std::max(top[v - whole], x[v]);
  float largest = top[0];
  for (const float t : top) largest = std::max(largest, t);
  float sums[kLanes] = {};
  for (std::size_t v = 0; v < whole; v += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      const float e = detail::fast_exp(x[v + l] - largest);
      p[v + l] = e;
      sums[l] += e;
    }
  }
  for (std::size_t v = whole; v < vocab; ++v) {
    const float e = detail::fast_exp(x[v] - largest);
    p[v] = e;
    sums[v - whole] += e;
  }
  float sum = 0.0F;
  for (const float lane : sums) sum += lane;
  const float inverse = 1.0F / sum;
  for (std::size_t v = 0; v < vocab; ++v) p[v] *= inverse;
  return std::log(sum) + largest;
}

SHARDWISE_CPU_CLONES
void add_scaled(float* __restrict d, const float* __restrict p, float scale, std::size_t vocab) {
  for (std::size_t v = 0; v < vocab; ++v) d[v] += p[v] * scale;
}

}  // namespace

void softmax_cross_entropy_forward(float* losses, float* probs, const float* logits,
                                   const std::int32_t* targets, std::size_t rows,
                                   std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* x = logits + r * vocab;
      // From the logits rather than log(p): exact where p underflows.
      losses[r] =
          softmax_row(probs + r * vocab, x, vocab) - x[static_cast<std::size_t>(targets[r])];
    }
  });
}

void softmax_cross_entropy_backward(float* dlogits, const float* dlosses, const float* probs,
                                    const std::int32_t* targets, std::size_t rows,
                                    std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      float* d = dlogits + r * vocab;
      add_scaled(d, probs + r * vocab, dlosses[r], vocab);
      d[static_cast<std::size_t>(targets[r])] -= dlosses[r];
    }
  });
}

}  // namespace shardwise::kernels

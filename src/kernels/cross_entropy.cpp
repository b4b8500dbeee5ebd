#include "shardwise/kernels/cross_entropy.hpp"

#include <cmath>

#include "fast_math.hpp"
#include "parallel.hpp"
#include "row_softmax.hpp"

namespace shardwise::kernels {
namespace {

constexpr std::size_t kRowsPerThread = 16;  // each row is a vocabulary of exponentials
using detail::row_exponentials;
using detail::row_largest;

SHARDWISE_CPU_CLONES
void row_scale(float* __restrict p, float factor, std::size_t vocab) {
  for (std::size_t v = 0; v < vocab; ++v) p[v] *= factor;
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
      float* p = probs + r * vocab;
      const float largest = row_largest(x, vocab, vocab);
      const float sum = row_exponentials(p, x, largest, vocab, vocab);
      row_scale(p, 1.0F / sum, vocab);
      // From the logits rather than log(p): exact where p underflows.
      losses[r] = targets[r] == kIgnoredTarget
                      ? 0.0F
                      : std::log(sum) + largest - x[static_cast<std::size_t>(targets[r])];
    }
  });
}

void softmax_cross_entropy_backward(float* dlogits, const float* dlosses, const float* probs,
                                    const std::int32_t* targets, std::size_t rows,
                                    std::size_t vocab) {
  softmax_row_add_scaled(dlogits, probs, dlosses, targets, rows, vocab);
  for (std::size_t r = 0; r < rows; ++r) {
    if (targets[r] != kIgnoredTarget) {
      dlogits[r * vocab + static_cast<std::size_t>(targets[r])] -= dlosses[r];
    }
  }
}

void softmax_row_largest(float* largest, const float* logits, std::size_t rows, std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r)
      largest[r] = row_largest(logits + r * vocab, vocab, vocab);
  });
}

void softmax_row_exponentials(float* probs, float* sums, const float* logits, const float* largest,
                              std::size_t rows, std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      sums[r] = row_exponentials(probs + r * vocab, logits + r * vocab, largest[r], vocab, vocab);
    }
  });
}

void softmax_row_normalise(float* probs, const float* sums, std::size_t rows, std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) row_scale(probs + r * vocab, 1.0F / sums[r], vocab);
  });
}

void softmax_row_add_scaled(float* dlogits, const float* probs, const float* dlosses,
                            const std::int32_t* targets, std::size_t rows, std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      if (targets[r] == kIgnoredTarget) continue;
      add_scaled(dlogits + r * vocab, probs + r * vocab, dlosses[r], vocab);
    }
  });
}

}  // namespace shardwise::kernels

#include "shardwise/kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>

#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

constexpr std::size_t kRowsPerThread = 16;  // each row is a vocabulary of exponentials

}  // namespace

void softmax_cross_entropy_forward(float* losses, float* probs, const float* logits,
                                   const std::int32_t* targets, std::size_t rows,
                                   std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* x = logits + r * vocab;
      float* p = probs + r * vocab;
      const float largest = *std::max_element(x, x + vocab);
      float sum = 0.0F;
      for (std::size_t v = 0; v < vocab; ++v) {
        p[v] = std::exp(x[v] - largest);
        sum += p[v];
      }
      for (std::size_t v = 0; v < vocab; ++v) p[v] /= sum;
      // From the logits rather than log(p): exact where p underflows.
      losses[r] = std::log(sum) + largest - x[static_cast<std::size_t>(targets[r])];
    }
  });
}

void softmax_cross_entropy_backward(float* dlogits, const float* dlosses, const float* probs,
                                    const std::int32_t* targets, std::size_t rows,
                                    std::size_t vocab) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* p = probs + r * vocab;
      float* d = dlogits + r * vocab;
      const float scale = dlosses[r];
      const auto target = static_cast<std::size_t>(targets[r]);
      for (std::size_t v = 0; v < vocab; ++v) d[v] += (p[v] - (v == target ? 1.0F : 0.0F)) * scale;
    }
  });
}

}  // namespace shardwise::kernels

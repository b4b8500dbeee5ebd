#include "shardwise/kernels/sum_of_squares.hpp"

#include <algorithm>
#include <vector>

#include "fast_math.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

constexpr std::size_t kBlock = 16384;

// One block's sum: lane l takes the elements l, l + kLanes, ...; a running double sum per lane
// instead of one chain of dependent adds (4 cycles each): 0.65 ms of a step of `tiny`, now 0.07.
SHARDWISE_CPU_CLONES
double block_squares(const float* __restrict x, std::size_t count) {
  constexpr std::size_t kLanes = detail::kLanes;
  const std::size_t whole = count - count % kLanes;
  double lanes[kLanes] = {};
  for (std::size_t i = 0; i < whole; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      const double v = x[i + l];
      lanes[l] += v * v;
    }
  }
  for (std::size_t i = whole; i < count; ++i) {
    const double v = x[i];
    lanes[i - whole] += v * v;
  }
  double total = 0;
  for (const double lane : lanes) total += lane;
  return total;
}

}  // namespace

double sum_of_squares(const float* x, std::size_t count) {
  const std::size_t blocks = (count + kBlock - 1) / kBlock;
  if (blocks <= 1) return block_squares(x, count);
  std::vector<double> partial(blocks);
  detail::parallel_for(blocks, 4, [&](std::size_t first, std::size_t last) {
    for (std::size_t b = first; b < last; ++b) {
      const std::size_t begin = b * kBlock;
      partial[b] = block_squares(x + begin, std::min(kBlock, count - begin));
    }
  });
  double total = 0;
  for (const double block : partial) total += block;
  return total;
}

}  // namespace shardwise::kernels

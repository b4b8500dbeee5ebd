#include "shardwise/kernels/sum_of_squares.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels {
namespace {

std::vector<float> values(std::size_t count) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(((i * 2654435761U) % 2001) / 1000.0) - 1.0F;
  }
  return out;
}

double reference(const std::vector<float>& x) {
  long double total = 0;
  for (const float v : x) total += static_cast<long double>(v) * v;
  return static_cast<double>(total);
}

// Empty, shorter than a lane row, lane rows with a tail, and several blocks of 16384 with a
// partial last one: within double rounding of a long double sum.
TEST(SumOfSquares, EqualsTheSumWrittenOut) {
  for (const std::size_t count :
       {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{37},
        std::size_t{16384}, std::size_t{3 * 16384 + 5}}) {
    const std::vector<float> x = values(count);
    const double want = reference(x);
    EXPECT_NEAR(sum_of_squares(x.data(), count), want, 1e-12 * (1.0 + want)) << count;
  }
}

// The blocks are split among threads but summed in order: the same bits on 1, 2 and 4 threads.
TEST(SumOfSquares, DoesNotDependOnTheThreadCount) {
  const std::vector<float> x = values(11 * 16384 + 123);
  const int before = blas_threads();
  std::vector<double> sums;
  for (const int threads : {1, 2, 4}) {
    set_blas_threads(threads);
    sums.push_back(sum_of_squares(x.data(), x.size()));
  }
  set_blas_threads(before);
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(sums[0], sums[2]);
}

// A NaN or an infinity anywhere reaches the sum, so the trainer's norm check sees it.
TEST(SumOfSquares, ANonFiniteElementReachesTheSum) {
  std::vector<float> x = values(5 * 16384);
  x[3 * 16384 + 7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sum_of_squares(x.data(), x.size())));
  x[3 * 16384 + 7] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(sum_of_squares(x.data(), x.size())));
}

}  // namespace
}  // namespace shardwise::kernels

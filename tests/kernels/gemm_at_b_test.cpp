// The packed product of weight gradients (src/kernels/gemm_at_b.hpp): C = alpha A^T B + beta C
// against a double-precision sum, on shapes with edge tiles, strides wider than the matrices and
// several depth blocks, for every tile kernel this machine runs.
#include "kernels/gemm_at_b.hpp"
#include "kernels/gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels::detail {
namespace {

std::vector<float> values(std::size_t count, std::size_t seed) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(((i + seed) * 2654435761U) % 2001) / 1000.0F - 1.0F;
  }
  return out;
}

struct Shape {
  std::size_t m, n, k;
};

const TileKernel kKernels[] = {TileKernel::kAvx512, TileKernel::kAvx2};

std::string name(TileKernel kernel) { return kernel == TileKernel::kAvx512 ? "avx512" : "avx2"; }

// C (m x n, row stride n + 3) after the product, with its gap columns.
std::vector<float> product(TileKernel kernel, const Shape& s, float alpha, float beta,
                           std::vector<float> c) {
  const std::vector<float> a = values(s.k * (s.m + 5), 1);
  const std::vector<float> b = values(s.k * (s.n + 2), 2);
  gemm_at_b(kernel, s.m, s.n, s.k, alpha, a.data(), s.m + 5, b.data(), s.n + 2, beta, c.data(),
            s.n + 3);
  return c;
}

TEST(GemmAtB, MatchesTheSumOnEdgeTilesStridesAndSeveralDepthBlocks) {
  const Shape shapes[] = {{1, 1, 1},    {7, 5, 3},       {8, 48, kDepthBlock}, {9, 49, 257},
                          {6, 16, 600}, {200, 100, 600}, {385, 390, 513},      {16, 800, 300}};
  for (const TileKernel kernel : kKernels) {
    if (!tile_kernel_supported(kernel)) continue;
    for (const Shape& s : shapes) {
      for (const float beta : {0.0F, 1.0F, -0.5F}) {
        const float alpha = 1.5F;
        const std::vector<float> c0 = values(s.m * (s.n + 3), 3);
        const std::vector<float> c = product(kernel, s, alpha, beta, c0);
        const std::vector<float> a = values(s.k * (s.m + 5), 1);
        const std::vector<float> b = values(s.k * (s.n + 2), 2);
        for (std::size_t i = 0; i < s.m; ++i) {
          for (std::size_t j = 0; j < s.n + 3; ++j) {
            const std::size_t at = i * (s.n + 3) + j;
            if (j >= s.n) {  // the gap past each row of C is not touched
              ASSERT_EQ(c[at], c0[at]);
              continue;
            }
            double sum = 0.0;
            double size = 0.0;
            for (std::size_t kk = 0; kk < s.k; ++kk) {
              const double term = static_cast<double>(a[kk * (s.m + 5) + i]) *
                                  static_cast<double>(b[kk * (s.n + 2) + j]);
              sum += term;
              size += std::abs(term);
            }
            const double expected = alpha * sum + beta * static_cast<double>(c0[at]);
            ASSERT_NEAR(c[at], expected, 1e-6 * (size + 1.0))
                << name(kernel) << " " << s.m << "x" << s.n << "x" << s.k << " beta " << beta
                << " at " << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(GemmAtB, BetaZeroNeverReadsC) {
  for (const TileKernel kernel : kKernels) {
    if (!tile_kernel_supported(kernel)) continue;
    for (const Shape& s : {Shape{9, 49, 300}, Shape{3, 2, 0}}) {
      std::vector<float> c(s.m * (s.n + 3), std::numeric_limits<float>::quiet_NaN());
      c = product(kernel, s, 1.0F, 0.0F, c);
      for (std::size_t i = 0; i < s.m; ++i) {
        for (std::size_t j = 0; j < s.n; ++j) {
          ASSERT_TRUE(std::isfinite(c[i * (s.n + 3) + j])) << name(kernel) << " " << s.k;
        }
      }
    }
  }
}

TEST(GemmAtB, AnEmptySumScalesC) {
  for (const TileKernel kernel : kKernels) {
    if (!tile_kernel_supported(kernel)) continue;
    const Shape s{4, 5, 0};
    const std::vector<float> c0 = values(s.m * (s.n + 3), 4);
    const std::vector<float> c = product(kernel, s, 2.0F, 0.5F, c0);
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t j = 0; j < s.n; ++j) {
        EXPECT_EQ(c[i * (s.n + 3) + j], 0.5F * c0[i * (s.n + 3) + j]);
      }
    }
  }
}

// Each element is one thread's, summed in the same depth blocks whatever the thread count; the
// threads split C's rows where it is tall and its columns where it is wide.
TEST(GemmAtB, TheSameBitsOnOneThreadAndOnFour) {
  for (const Shape& s : {Shape{776, 200, 700}, Shape{40, 1700, 300}}) {
    for (const TileKernel kernel : kKernels) {
      if (!tile_kernel_supported(kernel)) continue;
      const int before = blas_threads();
      set_blas_threads(1);
      const std::vector<float> one = product(kernel, s, 1.0F, 1.0F, values(s.m * (s.n + 3), 5));
      set_blas_threads(4);
      const std::vector<float> four = product(kernel, s, 1.0F, 1.0F, values(s.m * (s.n + 3), 5));
      set_blas_threads(before);
      EXPECT_EQ(one, four) << name(kernel) << " " << s.m << "x" << s.n;
    }
  }
}

// The products every kernel calls (gemm.hpp) take the packed kernel for a weight gradient whose
// operands pass the caches: the same bits as calling it.
TEST(GemmAtB, TheBlasEntryTakesItForLargeWeightGradients) {
  const auto best = best_tile_kernel();
  if (!best) GTEST_SKIP() << "no tile kernel on this machine";
  const Shape s{640, 384, 2048};  // operands of 2048 x (640 + 384) floats: 8 MiB
  const std::vector<float> a = values(s.k * (s.m + 5), 1);
  const std::vector<float> b = values(s.k * (s.n + 2), 2);
  std::vector<float> through_blas = values(s.m * (s.n + 3), 3);
  sgemm(true, false, s.m, s.n, s.k, 1.0F, a.data(), s.m + 5, b.data(), s.n + 2, 1.0F,
        through_blas.data(), s.n + 3);
  EXPECT_EQ(through_blas, product(*best, s, 1.0F, 1.0F, values(s.m * (s.n + 3), 3)));
}

TEST(GemmAtB, TheMachinesBestKernelIsOneItRuns) {
  if (const auto best = best_tile_kernel()) {
    EXPECT_TRUE(tile_kernel_supported(*best));
  } else {
    EXPECT_FALSE(tile_kernel_supported(TileKernel::kAvx2));
  }
}

}  // namespace
}  // namespace shardwise::kernels::detail

// AMX's bf16 tile products (src/kernels/amx_product.hpp) against sums in double of the same bf16
// values, and the packing of their operands (amx_packing.hpp) against the scalar rounding and the
// layouts' definitions. The products run only where this machine has AMX, the packing where it
// has AVX512_BF16; elsewhere the tests say so and skip (attention then takes the float32
// products, tests/kernels/attention_bf16_test.cpp).
#include "kernels/amx_product.hpp"
#include "kernels/amx_packing.hpp"
#include "kernels/bf16_bits.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace shardwise::kernels::detail {
namespace {

float value_at(std::size_t i, std::size_t seed) {
  return static_cast<float>(((i + seed) * 2654435761U) % 2001) / 1000.0F - 1.0F;
}

std::vector<BFloat16> bf16_values(std::size_t count, std::size_t seed) {
  std::vector<BFloat16> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i].bits = bf16_bits(value_at(i, seed));
  return out;
}

float low_half(std::uint32_t word) { return widened(static_cast<std::uint16_t>(word & 0xFFFFU)); }
float high_half(std::uint32_t word) { return widened(static_cast<std::uint16_t>(word >> 16)); }

struct Shape {
  std::size_t m, n, depth;
};

TEST(AmxProduct, IsTheSumOfTheSameBf16ValuesOnEdgeTilesAndStrides) {
  if (!amx_available()) GTEST_SKIP() << "this machine has no AMX bf16 tiles";
  const Shape shapes[] = {{1, 1, 32},    {15, 17, 32},  {16, 16, 64}, {17, 33, 96},
                          {64, 256, 64}, {64, 64, 256}, {40, 70, 32}, {33, 16, 128}};
  for (const Shape& s : shapes) {
    const std::size_t lda = s.depth + 8, ldb = round_up(s.n, kAmxSide) + 4, ldc = s.n + 3;
    const std::vector<BFloat16> a = bf16_values(round_up(s.m, kAmxSide) * lda, 1);
    std::vector<std::uint32_t> b(s.depth / 2 * ldb);
    for (std::size_t i = 0; i < b.size(); ++i) {
      b[i] = static_cast<std::uint32_t>(bf16_bits(value_at(i, 2))) |
             (static_cast<std::uint32_t>(bf16_bits(value_at(i, 3))) << 16);
    }
    for (const bool accumulate : {false, true}) {
      std::vector<float> c0(s.m * ldc);
      for (std::size_t i = 0; i < c0.size(); ++i) c0[i] = value_at(i, 4);
      std::vector<float> c = c0;
      amx_product(s.m, s.n, s.depth, a.data(), lda, b.data(), ldb, accumulate, c.data(), ldc);
      for (std::size_t i = 0; i < s.m; ++i) {
        for (std::size_t j = 0; j < ldc; ++j) {
          const std::size_t at = i * ldc + j;
          if (j >= s.n) {  // the gap past each row of C is not touched
            ASSERT_EQ(c[at], c0[at]);
            continue;
          }
          double sum = accumulate ? c0[at] : 0.0;
          double size = std::abs(sum);
          for (std::size_t kk = 0; kk < s.depth; ++kk) {
            const std::uint32_t word = b[(kk / 2) * ldb + j];
            const double term = static_cast<double>(widened(a[i * lda + kk].bits)) *
                                (kk % 2 == 0 ? low_half(word) : high_half(word));
            sum += term;
            size += std::abs(term);
          }
          ASSERT_NEAR(c[at], sum, 1e-6 * (size + 1.0))
              << s.m << "x" << s.n << "x" << s.depth << " accumulate " << accumulate << " at " << i
              << "," << j;
        }
      }
    }
  }
}

TEST(AmxProduct, RefusesADepthNotAMultipleOf32) {
  if (!amx_available()) GTEST_SKIP() << "this machine has no AMX bf16 tiles";
  std::vector<BFloat16> a(16 * 48);
  std::vector<std::uint32_t> b(24 * 16);
  std::vector<float> c(16 * 16);
  EXPECT_THROW(amx_product(16, 16, 48, a.data(), 48, b.data(), 16, false, c.data(), 16),
               std::logic_error);
}

TEST(AmxPacking, RoundsAsTheScalarRoundingAndPadsWithZeros) {
  if (!bf16_packing_available()) GTEST_SKIP() << "packing needs AVX512_BF16";
  const std::size_t rows = 5, cols = 37, stride = 41, to_rows = 16, to_cols = 64;
  std::vector<float> m(rows * stride);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = value_at(i, 5) * 3.0F;
  // Ties to even, both ways, an infinity and a NaN.
  m[0] = 1.0F + 1.0F / 256.0F;
  m[1] = 1.0F + 3.0F / 256.0F;
  m[2] = std::numeric_limits<float>::infinity();
  m[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<BFloat16> to(to_rows * (to_cols + 2), BFloat16{0x1234});
  round_rows(to.data(), m.data(), rows, cols, stride, to_rows, to_cols, to_cols + 2);
  for (std::size_t r = 0; r < to_rows; ++r) {
    for (std::size_t c = 0; c < to_cols + 2; ++c) {
      const std::uint16_t got = to[r * (to_cols + 2) + c].bits;
      if (c >= to_cols) {
        ASSERT_EQ(got, 0x1234) << "past the row's width";
      } else if (r < rows && c < cols) {
        ASSERT_EQ(got, bf16_bits(m[r * stride + c])) << r << "," << c;
      } else {
        ASSERT_EQ(got, 0) << "padding at " << r << "," << c;
      }
    }
  }
  EXPECT_EQ(to[0].bits, 0x3F80);  // 1 + 1/256 rounds down to the even 1
  EXPECT_EQ(to[1].bits, 0x3F82);  // 1 + 3/256 rounds up to the even 1 + 2/128

  // Pairs along rows: word (p, c) holds rows 2p (low) and 2p + 1 (high).
  const std::size_t pair_rows_out = 4, width = 48;
  std::vector<std::uint32_t> pairs(pair_rows_out * (width + 1), 7U);
  pair_rows(pairs.data(), m.data(), rows, cols, stride, pair_rows_out, width, width + 1);
  for (std::size_t p = 0; p < pair_rows_out; ++p) {
    for (std::size_t c = 0; c <= width; ++c) {
      const std::uint32_t word = pairs[p * (width + 1) + c];
      if (c == width) {
        ASSERT_EQ(word, 7U);
        continue;
      }
      const auto element = [&](std::size_t r) -> std::uint32_t {
        return r < rows && c < cols ? bf16_bits(m[r * stride + c]) : 0U;
      };
      ASSERT_EQ(word, element(2 * p) | (element(2 * p + 1) << 16)) << p << "," << c;
    }
  }

  // Transposes of the packed rows.
  std::vector<BFloat16> t(to_cols * to_rows);
  transpose_bf16(t.data(), to_rows, to.data(), to_cols + 2, to_rows, to_cols);
  std::vector<std::uint32_t> tp(to_cols / 2 * to_rows);
  transpose_pairs(tp.data(), to_rows, to.data(), to_cols + 2, to_rows, to_cols);
  for (std::size_t r = 0; r < to_rows; ++r) {
    for (std::size_t c = 0; c < to_cols; ++c) {
      ASSERT_EQ(t[c * to_rows + r].bits, to[r * (to_cols + 2) + c].bits);
    }
    for (std::size_t p = 0; p < to_cols / 2; ++p) {
      const std::uint32_t word = tp[p * to_rows + r];
      ASSERT_EQ(word & 0xFFFFU, to[r * (to_cols + 2) + 2 * p].bits);
      ASSERT_EQ(word >> 16, to[r * (to_cols + 2) + 2 * p + 1].bits);
    }
  }
}

}  // namespace
}  // namespace shardwise::kernels::detail

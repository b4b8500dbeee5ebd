// The bf16 products of mixed precision: with the CPU's bf16 units they equal the float32 products
// of the same (bf16) values up to the order of float32 sums; widened without them, bit for bit.
#include "shardwise/kernels/bf16_matmul.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "bf16_units.hpp"
#include "error_of.hpp"
#include "kernels/amx_product.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels {
namespace {

struct Operands {
  std::vector<BFloat16> narrow;
  std::vector<float> wide;  // the same values
};

Operands random_operands(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  Operands o{std::vector<BFloat16>(n), std::vector<float>(n)};
  std::vector<float> raw(n);
  for (float& v : raw) v = normal(gen);
  to_bf16(raw, o.narrow);
  to_float(o.narrow, o.wide);
  return o;
}

// |got - want| within float32 sums' reordering of `terms` products of `scale`.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, std::size_t terms,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size());
  const float tolerance = 1e-5F * static_cast<float>(terms);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance * (1 + std::fabs(want[i]))) << what << " " << i;
  }
}

TEST(Bf16Conversions, RoundToNearestEvenAndKeepSpecials) {
  const std::vector<float> in{1.0F,
                              1.00390625F /* 1 + 2^-8: a tie, to even (1) */,
                              1.01171875F /* 1 + 3 x 2^-8: a tie, to even (1 + 2^-6) */,
                              -2.5F,
                              std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(),
                              0.0F,
                              -0.0F};
  std::vector<BFloat16> narrow(in.size());
  to_bf16(in, narrow);
  std::vector<float> back(in.size());
  to_float(narrow, back);
  EXPECT_EQ(back[0], 1.0F);
  EXPECT_EQ(back[1], 1.0F);
  EXPECT_EQ(back[2], 1.015625F);
  EXPECT_EQ(back[3], -2.5F);
  EXPECT_TRUE(std::isinf(back[4]));
  EXPECT_TRUE(std::isnan(back[5]));
  EXPECT_EQ(narrow[7].bits, 0x8000);
  std::vector<BFloat16> short_out(2);
  EXPECT_THAT(testing::error_of([&] { to_bf16(in, short_out); }),
              ::testing::HasSubstr("8 floats into 2 bf16 elements"));
}

// The vectorised loops (each CPU's clone, over threads' ranges) round and widen every bit pattern
// as the scalar conversions of core/half.hpp do: ties, subnormals, infinities and NaNs among
// random patterns, in an array long enough for the vector loops and an odd tail.
TEST(Bf16Conversions, TheVectorLoopsAreTheScalarConversions) {
  std::vector<float> in(100003);
  std::uint32_t state = 12345;
  for (std::size_t i = 0; i < in.size(); ++i) {
    state = state * 1664525U + 1013904223U;
    std::uint32_t bits = state;
    if (i % 7 == 0) bits = (bits & 0xFFFF0000U) | 0x8000U;       // a tie
    if (i % 11 == 0) bits &= 0x807FFFFFU;                        // a subnormal
    if (i % 13 == 0) bits = 0x7F800000U | (bits & 0x80000000U);  // an infinity
    if (i % 17 == 0) bits = 0x7F800001U | (bits & 0x80000000U);  // a NaN in the low bits only
    std::memcpy(&in[i], &bits, sizeof bits);
  }
  std::vector<BFloat16> narrow(in.size());
  to_bf16(in, narrow);
  std::vector<float> back(in.size());
  to_float(narrow, back);
  // Rounding in place is the round trip, bit for bit (a kept array loses nothing in bf16).
  std::vector<float> rounded = in;
  round_to_bf16(rounded);
  for (std::size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(narrow[i].bits, shardwise::to_bfloat16(in[i]).bits) << "element " << i;
    const float widened = shardwise::to_float(narrow[i]);
    ASSERT_EQ(std::memcmp(&back[i], &widened, sizeof widened), 0) << "element " << i;
    ASSERT_EQ(std::memcmp(&rounded[i], &widened, sizeof widened), 0) << "element " << i;
  }
}

TEST(Bf16Matmul, ForwardAndBackwardAreTheFloat32ProductsOfTheSameValues) {
  constexpr std::size_t rows = 37, in = 64, out = 48;
  const Operands x = random_operands(rows * in, 1);
  const Operands w = random_operands(out * in, 2);
  const Operands dy = random_operands(rows * out, 3);
  std::vector<float> bias(out);
  for (std::size_t o = 0; o < out; ++o) bias[o] = 0.01F * static_cast<float>(o);

  // The float32 products of the same values.
  std::vector<float> y_ref(rows * out), dx_ref(rows * in, 0.5F), dw_ref(out * in, 0.25F),
      db_ref(out, 1.0F);
  matmul_forward(y_ref.data(), x.wide.data(), w.wide.data(), bias.data(), rows, in, out);
  matmul_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dy.wide.data(), x.wide.data(),
                  w.wide.data(), rows, in, out);

  for (const bool units : {false, true}) {
    if (units && !bf16_units()) continue;  // this CPU has none: the widened path alone
    const UnitsOn setting(units);
    std::vector<float> y(rows * out), dx(rows * in, 0.5F), dw(out * in, 0.25F), db(out, 1.0F);
    matmul_forward_bf16(y.data(), x.narrow.data(), w.narrow.data(), bias.data(), rows, in, out);
    matmul_backward_bf16(dx.data(), dw.data(), db.data(), dy.narrow.data(), x.narrow.data(),
                         w.narrow.data(), rows, in, out);
    if (!units) {  // the same calls of the float32 product: bit for bit
      EXPECT_EQ(y, y_ref);
      EXPECT_EQ(dx, dx_ref);
      EXPECT_EQ(dw, dw_ref);
    }
    expect_close(y, y_ref, in, "forward");
    expect_close(dx, dx_ref, out, "input gradient (added)");
    expect_close(dw, dw_ref, rows, "weight gradient (added)");
    expect_close(db, db_ref, rows, "bias gradient (added)");

    // Overwriting the input's gradient, and forward without a bias.
    std::vector<float> dx_over(rows * in, 99.0F), dx_over_ref(rows * in, 99.0F),
        dw2(out * in, 0.0F), dw2_ref(out * in, 0.0F);
    matmul_backward_bf16(dx_over.data(), dw2.data(), nullptr, dy.narrow.data(), x.narrow.data(),
                         w.narrow.data(), rows, in, out, InputGradient::kOverwrite);
    matmul_backward(dx_over_ref.data(), dw2_ref.data(), nullptr, dy.wide.data(), x.wide.data(),
                    w.wide.data(), rows, in, out, InputGradient::kOverwrite);
    expect_close(dx_over, dx_over_ref, out, "input gradient (overwritten)");
    std::vector<float> y_nobias(rows * out, 7.0F), y_nobias_ref(rows * out);
    matmul_forward_bf16(y_nobias.data(), x.narrow.data(), w.narrow.data(), nullptr, rows, in, out);
    matmul_forward(y_nobias_ref.data(), x.wide.data(), w.wide.data(), nullptr, rows, in, out);
    expect_close(y_nobias, y_nobias_ref, in, "forward without a bias");
  }
}

// A few rows (decoding's) take the dot products: the float32 products of the same values, with
// and without a bias, for widths below, at and past a 32-element load and odd ones (the pairs'
// tail), one to four rows, with the units and without.
TEST(Bf16Matmul, FewRowsAreTheFloat32ProductsOfTheSameValues) {
  for (const std::size_t in : {1U, 2U, 7U, 31U, 32U, 33U, 64U, 95U, 576U}) {
    for (const std::size_t rows : {1U, 2U, 4U}) {
      constexpr std::size_t out = 67;
      const Operands x = random_operands(rows * in, static_cast<std::uint32_t>(in + rows));
      const Operands w = random_operands(out * in, static_cast<std::uint32_t>(3 * in + 1));
      std::vector<float> bias(out);
      for (std::size_t o = 0; o < out; ++o) bias[o] = 0.5F - 0.01F * static_cast<float>(o);
      for (const float* b :
           {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
        std::vector<float> want(rows * out);
        matmul_forward(want.data(), x.wide.data(), w.wide.data(), b, rows, in, out);
        for (const bool units : {false, true}) {
          const UnitsOn setting(units);
          std::vector<float> got(rows * out, 7.0F);
          matmul_forward_bf16(got.data(), x.narrow.data(), w.narrow.data(), b, rows, in, out);
          expect_close(got, want, in, b == nullptr ? "few rows" : "few rows with a bias");
        }
      }
    }
  }
}

// Widened operands past what a thread keeps between calls (4 Mi floats) are the call's own: the
// same float32 product, bit for bit, and a small product after it still right.
TEST(Bf16Matmul, WidenedOperandsPastTheKeptSizeAreTheFloat32Product) {
  const UnitsOn off(false);
  for (const std::size_t in : {std::size_t{2049}, std::size_t{64}}) {
    constexpr std::size_t rows = 8, out = 2048;
    const Operands x = random_operands(rows * in, 4);
    const Operands w = random_operands(out * in, 5);
    std::vector<float> y(rows * out), y_ref(rows * out);
    matmul_forward_bf16(y.data(), x.narrow.data(), w.narrow.data(), nullptr, rows, in, out);
    matmul_forward(y_ref.data(), x.wide.data(), w.wide.data(), nullptr, rows, in, out);
    EXPECT_EQ(y, y_ref) << "depth " << in;
  }
}

// The products take the units by default only where they outrun float32's FMAs (AMX always);
// a test's setting holds for its scope and the default comes back after it; a run that widens
// has a note that says why.
TEST(Bf16Units, TheProductsTakeThemByDefaultWhereTheyAreFaster) {
  EXPECT_EQ(bf16_units_used(), bf16_units_faster());
  EXPECT_TRUE(!bf16_units_faster() || bf16_units());
  EXPECT_TRUE(!(detail::amx_available() && bf16_units()) || bf16_units_faster());
  {
    const UnitsOn on(true);
    EXPECT_EQ(bf16_units_used(), bf16_units());
    EXPECT_EQ(bf16_emulation_note().empty(), bf16_units());
  }
  {
    const UnitsOn off(false);
    EXPECT_FALSE(bf16_units_used());
    EXPECT_THAT(bf16_emulation_note(), ::testing::HasSubstr("bf16 is emulated"));
  }
  EXPECT_EQ(bf16_units_used(), bf16_units_faster());
  if (bf16_units() && !bf16_units_faster()) {
    EXPECT_THAT(bf16_emulation_note(), ::testing::HasSubstr("slower than its float32 FMAs"));
  }
}

}  // namespace
}  // namespace shardwise::kernels

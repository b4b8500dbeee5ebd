// bf16 attention (AttentionLayout::bf16): on AMX's tiles where this machine has them, and on the
// float32 products elsewhere (or with the bf16 units turned off), the same roundings of the same
// operands; both float32's attention within bf16's rounding, yet not float32's, and the roundings
// reach the products exactly. The AMX path's packing also runs on tiles emulated in plain loops
// wherever the CPU has AVX512_BF16. float32's forward and backward are checked against finite
// differences in gradient_check_test.cpp; here bf16's backward is held to float32's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "bf16_units.hpp"
#include "kernels/amx_packing.hpp"
#include "kernels/amx_product.hpp"
#include "kernels/attention_tiles.hpp"
#include "kernels/bf16_bits.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels {
namespace {

struct Case {
  std::size_t batch, seq, heads, kv_heads, head;
};

// Sequences of one tile, of several of both kinds with edges, one position; heads of 64, of 24
// and 80 (padded to AMX's tiles); grouped and multi-head.
const Case kCases[] = {{2, 37, 4, 2, 64},
                       {1, 300, 2, 1, 24},
                       {1, 1, 2, 2, 32},
                       {1, 520, 2, 2, 64},
                       {1, 130, 3, 3, 80}};

std::vector<float> values(std::size_t count, std::size_t seed, float scale) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = scale * (static_cast<float>(((i + seed) * 2654435761U) % 2001) / 1000.0F - 1.0F);
  }
  return out;
}

struct Result {
  std::vector<float> out, lse, dq, dk, dv;
};

struct Inputs {
  AttentionLayout layout;
  std::vector<float> q, k, v, dout;
  explicit Inputs(const Case& c) {
    const std::size_t q_stride = c.heads * c.head + 3, kv_stride = c.kv_heads * c.head + 5;
    layout = {c.batch, c.seq, c.heads, c.kv_heads, c.head, q_stride, kv_stride};
    // q, k and v as bf16 mixed precision gives them: bf16 roundings.
    q = values(c.batch * c.seq * q_stride, 1, 2.0F);
    k = values(c.batch * c.seq * kv_stride, 2, 2.0F);
    v = values(c.batch * c.seq * kv_stride, 3, 1.0F);
    round_to_bf16(q);
    round_to_bf16(k);
    round_to_bf16(v);
    dout = values(c.batch * c.seq * c.heads * c.head, 4, 1.0F);
  }
};

// amx_product's contract in plain loops: each product of two bf16 values is exact in float32,
// summed in order along the depth. It reads all that the contract says AMX reads (rows and
// columns to 16), so that a buffer sized short fails under the sanitizers.
void emulated_tiles(std::size_t m, std::size_t n, std::size_t depth, const BFloat16* a,
                    std::size_t lda, const std::uint32_t* b, std::size_t ldb, bool accumulate,
                    float* c, std::size_t ldc) {
  using detail::widened;
  volatile std::uint32_t touched = 0;
  const std::size_t m16 = detail::round_up(m, detail::kAmxSide);
  const std::size_t n16 = detail::round_up(n, detail::kAmxSide);
  for (std::size_t i = 0; i < m16; ++i) {
    for (std::size_t kk = 0; kk < depth; ++kk) touched = touched + a[i * lda + kk].bits;
  }
  for (std::size_t p = 0; p < depth / 2; ++p) {
    for (std::size_t j = 0; j < n16; ++j) touched = touched + b[p * ldb + j];
  }
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      float sum = 0.0F;
      for (std::size_t kk = 0; kk < depth; ++kk) {
        const std::uint32_t word = b[(kk / 2) * ldb + j];
        const auto half = static_cast<std::uint16_t>(kk % 2 == 0 ? word & 0xFFFFU : word >> 16);
        sum += widened(a[i * lda + kk].bits) * widened(half);
      }
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + sum : sum;
    }
  }
}

enum class Path { kFloat32, kBf16, kAmxEmulated };

Result run(const Inputs& in, Path path, InputGradient mode = InputGradient::kOverwrite,
           float initial = 0.0F) {
  AttentionLayout layout = in.layout;
  layout.bf16 = path != Path::kFloat32;
  Result r;
  r.out.resize(in.dout.size());
  r.lse.resize(layout.batch * layout.heads * layout.seq);
  r.dq.assign(in.q.size(), initial);
  r.dk.assign(in.k.size(), initial);
  r.dv.assign(in.v.size(), initial);
  if (path == Path::kAmxEmulated) {
    detail::attention_forward_amx(r.out.data(), r.lse.data(), in.q.data(), in.k.data(), in.v.data(),
                                  layout, emulated_tiles);
    detail::attention_backward_amx(r.dq.data(), r.dk.data(), r.dv.data(), in.dout.data(),
                                   in.q.data(), in.k.data(), in.v.data(), r.out.data(),
                                   r.lse.data(), layout, mode, emulated_tiles);
    return r;
  }
  attention_forward(r.out.data(), r.lse.data(), in.q.data(), in.k.data(), in.v.data(), layout);
  attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), in.dout.data(), in.q.data(),
                     in.k.data(), in.v.data(), r.out.data(), r.lse.data(), layout, mode);
  return r;
}

// The largest difference between a and b relative to b's largest magnitude (at least 0.01: one
// position's query and key gradients are zero but for float32's rounding); the gaps between rows
// (the strides' padding) are compared too and must stay as they were.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double largest = 0.01, diff = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(b[i])));
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return diff / largest;
}

std::string name(const Case& c) {
  return std::to_string(c.batch) + "x" + std::to_string(c.seq) + " heads " +
         std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " of " +
         std::to_string(c.head);
}

// The AMX path (on AMX, or on emulated tiles) against the float32 products of the same
// roundings: they differ in the order of their float32 sums, and where that moves a weight
// across a bf16 rounding boundary.
void expect_amx_path_is_the_float32_products(bool emulated) {
  const Path path = emulated ? Path::kAmxEmulated : Path::kBf16;
  for (const Case& c : kCases) {
    const Inputs in(c);
    const Result amx = run(in, path);
    Result float32_products;
    {
      const UnitsOn off(false);
      float32_products = run(in, Path::kBf16);
    }
    EXPECT_LT(relative_difference(amx.out, float32_products.out), 1e-3) << name(c);
    EXPECT_LT(relative_difference(amx.lse, float32_products.lse), 1e-6) << name(c);
    EXPECT_LT(relative_difference(amx.dq, float32_products.dq), 2e-3) << name(c);
    EXPECT_LT(relative_difference(amx.dk, float32_products.dk), 2e-3) << name(c);
    EXPECT_LT(relative_difference(amx.dv, float32_products.dv), 2e-3) << name(c);
    // Accumulating adds the same gradients onto what the arrays held.
    const Result added = run(in, path, InputGradient::kAccumulate, 1.0F);
    for (std::size_t i = 0; i < amx.dq.size(); ++i)
      ASSERT_NEAR(added.dq[i], amx.dq[i] + 1.0F, 1e-5);
    for (std::size_t i = 0; i < amx.dk.size(); ++i)
      ASSERT_NEAR(added.dk[i], amx.dk[i] + 1.0F, 1e-5);
    for (std::size_t i = 0; i < amx.dv.size(); ++i)
      ASSERT_NEAR(added.dv[i], amx.dv[i] + 1.0F, 1e-5);
  }
}

TEST(AttentionBf16, OnAmxItIsTheFloat32ProductsOfTheSameRoundings) {
  if (!detail::amx_available() || !bf16_units()) GTEST_SKIP() << "this machine has no AMX";
  expect_amx_path_is_the_float32_products(false);
}

TEST(AttentionBf16, TheAmxPathOnEmulatedTilesIsTheFloat32ProductsOfTheSameRoundings) {
  if (!detail::bf16_packing_available()) GTEST_SKIP() << "the AMX path packs with AVX512_BF16";
  expect_amx_path_is_the_float32_products(true);
}

// On either path bf16 attention is float32's within bf16's rounding of the weights and the
// gradients, and is not float32's: a path that skipped a rounding would match float32 more
// closely than the rounding allows for, one that rounded the wrong operand (or padded with
// anything but zeros) would miss by far more.
TEST(AttentionBf16, IsFloat32sAttentionWithinTheRoundingOfItsOperands) {
  for (const bool units : {true, false}) {
    const UnitsOn on(units);
    for (const Case& c : kCases) {
      const Inputs in(c);
      const Result fp32 = run(in, Path::kFloat32);
      const Result bf16 = run(in, Path::kBf16);
      const std::string what = name(c) + (units ? " (bf16 units on)" : " (units off)");
      EXPECT_LT(relative_difference(bf16.out, fp32.out), 1e-2) << what;
      EXPECT_LT(relative_difference(bf16.lse, fp32.lse), 1e-6) << what;
      EXPECT_LT(relative_difference(bf16.dq, fp32.dq), 2e-2) << what;
      EXPECT_LT(relative_difference(bf16.dk, fp32.dk), 2e-2) << what;
      EXPECT_LT(relative_difference(bf16.dv, fp32.dv), 2e-2) << what;
      if (c.seq > 1) {  // one position: its single weight is 1, exact in bf16
        EXPECT_GT(relative_difference(bf16.out, fp32.out), 1e-5) << what;
        EXPECT_GT(relative_difference(bf16.dv, fp32.dv), 1e-5) << what;
      }
    }
  }
}

// Whether x is a bf16 value.
bool is_bf16(float x) { return detail::widened(detail::bf16_bits(x)) == x; }

// Whether a is b within 4 of float32's rounding steps of b.
bool within_float32_steps(float a, float b) {
  return std::abs(a - b) <= std::ldexp(std::abs(b), -21);
}

// The roundings reach the products, on every path. With one position, dv is the output's
// gradient times a weight of 1 (to float32's rounding of the softmax): the gradient's rounding.
// With two, where the second position's output gradient is 1 in the first lane (0 elsewhere) and
// the first's is 0, dv of the first key is exactly the second query's weight of it; where the
// first key is 1 in the first lane (0 elsewhere) and the second 0, dq of the second query is, in
// the first lane, exactly its scores' gradient of the first key. float32's are not bf16 values.
TEST(AttentionBf16, TheRoundingsReachTheProducts) {
  const std::vector<Path> paths =
      detail::bf16_packing_available()
          ? std::vector<Path>{Path::kFloat32, Path::kBf16, Path::kAmxEmulated}
          : std::vector<Path>{Path::kFloat32, Path::kBf16};
  for (const bool units : {true, false}) {
    const UnitsOn on(units);
    for (const Path path : paths) {
      const std::string what = std::string(path == Path::kFloat32 ? "float32" : "bf16") +
                               (path == Path::kAmxEmulated ? " on emulated tiles" : "") +
                               (units ? ", bf16 units on" : ", units off");
      // One position, 4 heads of 24, output gradients of 24 significant bits.
      Inputs one({1, 1, 4, 4, 24});
      for (float& x : one.dout) x = x * 1.2345678F + 0.1F;
      const Result single = run(one, path);
      std::size_t beyond_bf16 = 0;
      for (std::size_t i = 0; i < one.dout.size(); ++i) {
        const float dout = one.dout[i];
        const float rounded = detail::widened(detail::bf16_bits(dout));
        const float expected = path == Path::kFloat32 ? dout : rounded;
        ASSERT_TRUE(within_float32_steps(single.dv[i], expected))
            << what << ": dv " << single.dv[i] << " for an output gradient of " << dout;
        beyond_bf16 += within_float32_steps(rounded, dout) ? 0 : 1;
      }
      EXPECT_GT(beyond_bf16, one.dout.size() / 2) << "the test's gradients need more bits";

      // Two positions, 8 heads of 32.
      Inputs two({1, 2, 8, 8, 32});
      const std::size_t qs = two.layout.q_stride, ks = two.layout.kv_stride, os = 8 * 32;
      std::fill(two.dout.begin(), two.dout.end(), 0.0F);
      for (std::size_t h = 0; h < 8; ++h) {
        std::fill(two.k.begin() + h * 32, two.k.begin() + (h + 1) * 32, 0.0F);
        std::fill(two.k.begin() + ks + h * 32, two.k.begin() + ks + (h + 1) * 32, 0.0F);
        two.k[h * 32] = 1.0F;
        two.dout[os + h * 32] = 1.0F;
      }
      const Result pair = run(two, path);
      std::size_t weights_bf16 = 0, dscores_bf16 = 0;
      for (std::size_t h = 0; h < 8; ++h) {
        weights_bf16 += is_bf16(pair.dv[h * 32]) ? 1 : 0;
        dscores_bf16 += is_bf16(pair.dq[qs + h * 32]) ? 1 : 0;
        ASSERT_GT(pair.dv[h * 32], 0.0F) << what;
        ASSERT_NE(pair.dq[qs + h * 32], 0.0F) << what;
      }
      if (path == Path::kFloat32) {
        EXPECT_LT(weights_bf16, 8U) << what << ": the test's weights need more bits";
        EXPECT_LT(dscores_bf16, 8U) << what << ": the test's gradients need more bits";
      } else {
        EXPECT_EQ(weights_bf16, 8U) << what;
        EXPECT_EQ(dscores_bf16, 8U) << what;
      }
    }
  }
}

// Each (sequence, head) is one thread's, its sums in one order: the thread count changes no bit.
TEST(AttentionBf16, TheSameBitsOnOneThreadAndOnFour) {
  const Inputs in(kCases[3]);
  const int before = blas_threads();
  set_blas_threads(1);
  const Result one = run(in, Path::kBf16);
  set_blas_threads(4);
  const Result four = run(in, Path::kBf16);
  set_blas_threads(before);
  EXPECT_EQ(one.out, four.out);
  EXPECT_EQ(one.lse, four.lse);
  EXPECT_EQ(one.dq, four.dq);
  EXPECT_EQ(one.dk, four.dk);
  EXPECT_EQ(one.dv, four.dv);
}

}  // namespace
}  // namespace shardwise::kernels

// bf16 attention (AttentionLayout::bf16): on AMX's tiles where this machine has them, and on the
// float32 products elsewhere (or with the bf16 units turned off), the same roundings of the same
// operands; both float32's attention within bf16's rounding, yet not float32's (the weights and
// gradients are rounded). float32's forward and backward are checked against finite differences
// in gradient_check_test.cpp; here bf16's backward is held to float32's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "bf16_units.hpp"
#include "kernels/amx_product.hpp"
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

Result run(const Inputs& in, bool bf16, InputGradient mode = InputGradient::kOverwrite,
           float initial = 0.0F) {
  AttentionLayout layout = in.layout;
  layout.bf16 = bf16;
  Result r;
  r.out.resize(in.dout.size());
  r.lse.resize(layout.batch * layout.heads * layout.seq);
  attention_forward(r.out.data(), r.lse.data(), in.q.data(), in.k.data(), in.v.data(), layout);
  r.dq.assign(in.q.size(), initial);
  r.dk.assign(in.k.size(), initial);
  r.dv.assign(in.v.size(), initial);
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

// AMX and the float32 products take the same roundings of the same operands; they differ only in
// the order of their float32 sums, and where that moves a weight across a bf16 rounding boundary.
TEST(AttentionBf16, OnAmxItIsTheFloat32ProductsOfTheSameRoundings) {
  if (!detail::amx_available() || !bf16_units()) GTEST_SKIP() << "this machine has no AMX";
  for (const Case& c : kCases) {
    const Inputs in(c);
    const Result amx = run(in, true);
    Result emulated;
    {
      const UnitsOn off(false);
      emulated = run(in, true);
    }
    EXPECT_LT(relative_difference(amx.out, emulated.out), 1e-3) << name(c);
    EXPECT_LT(relative_difference(amx.lse, emulated.lse), 1e-6) << name(c);
    EXPECT_LT(relative_difference(amx.dq, emulated.dq), 2e-3) << name(c);
    EXPECT_LT(relative_difference(amx.dk, emulated.dk), 2e-3) << name(c);
    EXPECT_LT(relative_difference(amx.dv, emulated.dv), 2e-3) << name(c);
    // Accumulating adds the same gradients onto what the arrays held.
    const Result added = run(in, true, InputGradient::kAccumulate, 1.0F);
    for (std::size_t i = 0; i < amx.dq.size(); ++i)
      ASSERT_NEAR(added.dq[i], amx.dq[i] + 1.0F, 1e-5);
    for (std::size_t i = 0; i < amx.dk.size(); ++i)
      ASSERT_NEAR(added.dk[i], amx.dk[i] + 1.0F, 1e-5);
    for (std::size_t i = 0; i < amx.dv.size(); ++i)
      ASSERT_NEAR(added.dv[i], amx.dv[i] + 1.0F, 1e-5);
  }
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
      const Result fp32 = run(in, false);
      const Result bf16 = run(in, true);
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

// Each (sequence, head) is one thread's, its sums in one order: the thread count changes no bit.
TEST(AttentionBf16, TheSameBitsOnOneThreadAndOnFour) {
  const Inputs in(kCases[3]);
  const int before = blas_threads();
  set_blas_threads(1);
  const Result one = run(in, true);
  set_blas_threads(4);
  const Result four = run(in, true);
  set_blas_threads(before);
  EXPECT_EQ(one.out, four.out);
  EXPECT_EQ(one.lse, four.lse);
  EXPECT_EQ(one.dq, four.dq);
  EXPECT_EQ(one.dk, four.dk);
  EXPECT_EQ(one.dv, four.dv);
}

}  // namespace
}  // namespace shardwise::kernels

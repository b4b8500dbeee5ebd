// Llama's kernels against their definitions and central differences: RMSNorm, rotary
// embeddings (Hugging Face's rotate_half layout, Llama 3's frequency scaling), SwiGLU, and
// grouped-query attention against multi-head attention over repeated keys and values.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "gradient_check.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/rmsnorm.hpp"
#include "shardwise/kernels/rotary.hpp"
#include "shardwise/kernels/swiglu.hpp"

namespace shardwise::kernels {
namespace {

using testing::expect_gradient;
using testing::random_values;
using testing::weighted_sum;

TEST(LlamaKernels, RmsNormIsItsDefinitionAndItsGradient) {
  const std::size_t rows = 4, channels = 6;
  const float eps = 1e-6F;
  std::vector<float> inp = random_values(rows * channels, 1);
  std::vector<float> weight = random_values(channels, 2);
  const std::vector<float> probe = random_values(rows * channels, 3);
  std::vector<float> out(rows * channels), rstd(rows);
  const auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), eps, rows, channels);
    return weighted_sum(out, probe);
  };
  (void)loss();
  for (std::size_t r = 0; r < rows; ++r) {
    double squares = 0;
    for (std::size_t c = 0; c < channels; ++c)
      squares += inp[r * channels + c] * inp[r * channels + c];
    const double s = 1 / std::sqrt(squares / channels + eps);
    for (std::size_t c = 0; c < channels; ++c) {
      EXPECT_NEAR(out[r * channels + c], inp[r * channels + c] * s * weight[c], 1e-5);
    }
  }
  std::vector<float> dinp(inp.size(), 7.0F), dweight(channels);
  rmsnorm_backward(dinp.data(), dweight.data(), probe.data(), inp.data(), weight.data(),
                   rstd.data(), rows, channels, InputGradient::kOverwrite);
  expect_gradient(inp, dinp, loss, "dinp");
  expect_gradient(weight, dweight, loss, "dweight");
  // Accumulating adds onto what is there.
  std::vector<float> again(inp.size(), 1.0F), dweight2(channels);
  rmsnorm_backward(again.data(), dweight2.data(), probe.data(), inp.data(), weight.data(),
                   rstd.data(), rows, channels);
  for (std::size_t i = 0; i < inp.size(); ++i) EXPECT_FLOAT_EQ(again[i], dinp[i] + 1.0F);
}

TEST(LlamaKernels, RotaryRotatesEachHalfPairAndBackIsItsGradient) {
  const std::size_t batch = 2, seq = 5, heads = 3, head = 8, stride = heads * head + 4;
  const RotaryTable table(rotary_frequencies(head, 10000.0), seq);
  std::vector<float> x = random_values(batch * seq * stride, 4);
  std::vector<float> rotated = x;
  table.rotate(rotated.data(), batch, seq, heads, stride);
  for (std::size_t row = 0; row < batch * seq; ++row) {
    const std::size_t t = row % seq;
    for (std::size_t h = 0; h < heads; ++h) {
      for (std::size_t i = 0; i < head / 2; ++i) {
        const double angle = static_cast<double>(t) * std::pow(10000.0, -2.0 * i / head);
        const float a = x[row * stride + h * head + i],
                    b = x[row * stride + h * head + i + head / 2];
        EXPECT_NEAR(rotated[row * stride + h * head + i], a * std::cos(angle) - b * std::sin(angle),
                    1e-4);
        EXPECT_NEAR(rotated[row * stride + h * head + i + head / 2],
                    b * std::cos(angle) + a * std::sin(angle), 1e-4);
      }
    }
    // The floats past the heads are not touched.
    for (std::size_t c = heads * head; c < stride; ++c)
      EXPECT_EQ(rotated[row * stride + c], x[row * stride + c]);
  }
  // A rotation's gradient is its transpose, the inverse rotation.
  const std::vector<float> probe = random_values(x.size(), 5);
  std::vector<float> grad = probe;
  table.rotate_back(grad.data(), batch, seq, heads, stride);
  const auto loss = [&] {
    std::vector<float> y = x;
    table.rotate(y.data(), batch, seq, heads, stride);
    return weighted_sum(y, probe);
  };
  expect_gradient(x, grad, loss, "dx");
  EXPECT_THROW(table.rotate(x.data(), 1, seq + 1, 1, stride), std::exception);
}

TEST(LlamaKernels, Llama3ScalingDividesLongWavelengthsAndKeepsShortOnes) {
  const RotaryScaling scaling{8.0, 1.0, 4.0, 8192};
  const std::size_t head = 128;
  const std::vector<float> plain = rotary_frequencies(head, 500000.0);
  const std::vector<float> scaled = rotary_frequencies(head, 500000.0, scaling);
  int low = 0, high = 0, medium = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const double wavelength = 2 * std::numbers::pi / plain[i];
    if (wavelength < 8192 / 4.0) {
      EXPECT_EQ(scaled[i], plain[i]);
      ++high;
    } else if (wavelength > 8192 / 1.0) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i] / 8.0F);
      ++low;
    } else {
      const double smooth = (8192 / wavelength - 1.0) / 3.0;
      EXPECT_NEAR(scaled[i], (1 - smooth) * plain[i] / 8 + smooth * plain[i], 1e-6 * plain[i]);
      ++medium;
    }
  }
  // Llama 3.1's frequencies fall in all three bands.
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
  EXPECT_GT(medium, 0);
}

TEST(LlamaKernels, SwiGluIsItsDefinitionAndItsGradient) {
  const std::size_t count = 9;
  std::vector<float> gate = random_values(count, 6), up = random_values(count, 7);
  const std::vector<float> probe = random_values(count, 8);
  std::vector<float> out(count);
  const auto loss = [&] {
    swiglu_forward(out.data(), gate.data(), up.data(), count);
    return weighted_sum(out, probe);
  };
  (void)loss();
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_NEAR(out[i], gate[i] / (1 + std::exp(-gate[i])) * up[i], 1e-6);
  }
  std::vector<float> dgate(count), dup(count);
  swiglu_backward(dgate.data(), dup.data(), probe.data(), gate.data(), up.data(), count,
                  InputGradient::kOverwrite);
  expect_gradient(gate, dgate, loss, "dgate");
  expect_gradient(up, dup, loss, "dup");
  // In place (the Llama's backward writes the gradients over gate and up), over more elements
  // than one thread's share: the same bits.
  const std::size_t many = 20011;
  const std::vector<float> many_gate = random_values(many, 9), many_up = random_values(many, 10);
  const std::vector<float> many_dout = random_values(many, 11);
  std::vector<float> apart_gate(many), apart_up(many);
  swiglu_backward(apart_gate.data(), apart_up.data(), many_dout.data(), many_gate.data(),
                  many_up.data(), many, InputGradient::kOverwrite);
  std::vector<float> in_place_gate = many_gate, in_place_up = many_up;
  swiglu_backward(in_place_gate.data(), in_place_up.data(), many_dout.data(), in_place_gate.data(),
                  in_place_up.data(), many, InputGradient::kOverwrite);
  EXPECT_EQ(in_place_gate, apart_gate);
  EXPECT_EQ(in_place_up, apart_up);
}

// Grouped-query attention equals multi-head attention whose every query head has its own copy
// of its group's keys and values; its key and value gradients are the copies' summed.
TEST(LlamaKernels, GroupedQueryAttentionIsAttentionOverRepeatedKeysAndValues) {
  for (const std::size_t seq : {7, 300}) {  // one tile, and several of both kinds
    const std::size_t batch = 2, heads = 6, kv_heads = 2, head = 8, group = heads / kv_heads;
    const std::size_t qw = heads * head, kvw = kv_heads * head;
    const std::vector<float> q = random_values(batch * seq * qw, 9);
    const std::vector<float> k = random_values(batch * seq * kvw, 10);
    const std::vector<float> v = random_values(batch * seq * kvw, 11);
    const std::vector<float> dout = random_values(batch * seq * qw, 12);
    // The packed multi-head input: q, then every query head's copy of k, then of v.
    std::vector<float> qkv(batch * seq * 3 * qw);
    for (std::size_t row = 0; row < batch * seq; ++row) {
      for (std::size_t h = 0; h < heads; ++h) {
        for (std::size_t d = 0; d < head; ++d) {
          const std::size_t g = h / group;
          qkv[row * 3 * qw + h * head + d] = q[row * qw + h * head + d];
          qkv[row * 3 * qw + qw + h * head + d] = k[row * kvw + g * head + d];
          qkv[row * 3 * qw + 2 * qw + h * head + d] = v[row * kvw + g * head + d];
        }
      }
    }
    std::vector<float> out_mha(batch * seq * qw), lse_mha(batch * heads * seq);
    attention_forward(out_mha.data(), lse_mha.data(), qkv.data(), batch, seq, qw, heads);
    std::vector<float> dqkv(qkv.size());
    attention_backward(dqkv.data(), dout.data(), qkv.data(), out_mha.data(), lse_mha.data(), batch,
                       seq, qw, heads, InputGradient::kOverwrite);

    const AttentionLayout layout{batch, seq, heads, kv_heads, head, qw, kvw};
    std::vector<float> out(batch * seq * qw), lse(batch * heads * seq);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), layout);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], out_mha[i], 1e-5) << i;
    for (std::size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], lse_mha[i], 1e-5) << i;
    std::vector<float> dq(q.size(), 5.0F), dk(k.size(), 5.0F), dv(v.size(), 5.0F);
    attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                       out.data(), lse.data(), layout, InputGradient::kOverwrite);
    for (std::size_t row = 0; row < batch * seq; ++row) {
      for (std::size_t h = 0; h < heads; ++h) {
        for (std::size_t d = 0; d < head; ++d) {
          ASSERT_NEAR(dq[row * qw + h * head + d], dqkv[row * 3 * qw + h * head + d], 1e-4);
        }
      }
      for (std::size_t g = 0; g < kv_heads; ++g) {
        for (std::size_t d = 0; d < head; ++d) {
          double dk_sum = 0, dv_sum = 0;
          for (std::size_t h = g * group; h < (g + 1) * group; ++h) {
            dk_sum += dqkv[row * 3 * qw + qw + h * head + d];
            dv_sum += dqkv[row * 3 * qw + 2 * qw + h * head + d];
          }
          ASSERT_NEAR(dk[row * kvw + g * head + d], dk_sum, 1e-4);
          ASSERT_NEAR(dv[row * kvw + g * head + d], dv_sum, 1e-4);
        }
      }
    }
    // Accumulating adds every head's part onto what the gradients held.
    std::vector<float> dk2(k.size(), 1.0F), dv2(v.size(), 1.0F), dq2(q.size(), 1.0F);
    attention_backward(dq2.data(), dk2.data(), dv2.data(), dout.data(), q.data(), k.data(),
                       v.data(), out.data(), lse.data(), layout);
    for (std::size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(dk2[i], dk[i] + 1.0F, 1e-4);
    for (std::size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(dq2[i], dq[i] + 1.0F, 1e-4);
  }
}

}  // namespace
}  // namespace shardwise::kernels

// Every kernel's backward against central differences of its forward: the loss is the sum of
// the outputs weighted by a fixed random probe, so d loss / d out = probe is what backward gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/embedding.hpp"
#include "shardwise/kernels/layernorm.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels {
namespace {

using testing::expect_gradient;
using testing::random_values;
using testing::weighted_sum;

TEST(GradientCheck, Matmul) {
  const std::size_t rows = 5, in = 7, out = 3;
  std::vector<float> inp = random_values(rows * in, 1);
  std::vector<float> weight = random_values(out * in, 2);
  std::vector<float> bias = random_values(out, 3);
  const std::vector<float> probe = random_values(rows * out, 4);
  std::vector<float> y(rows * out);
  const auto loss = [&] {
    matmul_forward(y.data(), inp.data(), weight.data(), bias.data(), rows, in, out);
    return weighted_sum(y, probe);
  };
  // The forward against the definition first.
  (void)loss();
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t o = 0; o < out; ++o) {
      double expected = bias[o];
      for (std::size_t c = 0; c < in; ++c) expected += inp[r * in + c] * weight[o * in + c];
      EXPECT_NEAR(y[r * out + o], expected, 1e-5);
    }
  }
  std::vector<float> dinp(inp.size()), dweight(weight.size()), dbias(bias.size());
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), probe.data(), inp.data(),
                  weight.data(), rows, in, out);
  expect_gradient(inp, dinp, loss, "dinp");
  expect_gradient(weight, dweight, loss, "dweight");
  expect_gradient(bias, dbias, loss, "dbias");
}

// kOverwrite writes the input's gradient over whatever the buffer held (NaN here), as adding it to
// zeros would; the parameters' gradients still add.
TEST(GradientCheck, MatmulBackwardCanWriteTheInputGradient) {
  const std::size_t rows = 5, in = 6, out = 7;
  const std::vector<float> inp = random_values(rows * in, 31);
  const std::vector<float> weight = random_values(out * in, 32);
  const std::vector<float> dout = random_values(rows * out, 33);
  std::vector<float> added(rows * in, 0.0F), dweight1(out * in, 1.0F), dbias1(out, 1.0F);
  matmul_backward(added.data(), dweight1.data(), dbias1.data(), dout.data(), inp.data(),
                  weight.data(), rows, in, out);
  std::vector<float> written(rows * in, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> dweight2(out * in, 1.0F), dbias2(out, 1.0F);
  matmul_backward(written.data(), dweight2.data(), dbias2.data(), dout.data(), inp.data(),
                  weight.data(), rows, in, out, InputGradient::kOverwrite);
  EXPECT_EQ(written, added);
  EXPECT_EQ(dweight2, dweight1);
  EXPECT_EQ(dbias2, dbias1);
}

// The input's gradient written over the input (the Llama's MLP does so): the weight's gradient
// still read the input, and the input's gradient is the one written elsewhere. The shapes are
// large enough that the BLAS blocks them.
TEST(GradientCheck, MatmulBackwardCanWriteTheInputGradientOverTheInput) {
  for (const std::size_t rows : {std::size_t{5}, std::size_t{300}}) {
    const std::size_t in = 130, out = 70;
    const std::vector<float> inp = random_values(rows * in, 34);
    const std::vector<float> weight = random_values(out * in, 35);
    const std::vector<float> dout = random_values(rows * out, 36);
    std::vector<float> apart(rows * in), dweight1(out * in, 1.0F);
    matmul_backward(apart.data(), dweight1.data(), nullptr, dout.data(), inp.data(), weight.data(),
                    rows, in, out, InputGradient::kOverwrite);
    std::vector<float> over = inp, dweight2(out * in, 1.0F);
    matmul_backward(over.data(), dweight2.data(), nullptr, dout.data(), over.data(), weight.data(),
                    rows, in, out, InputGradient::kOverwrite);
    EXPECT_EQ(over, apart) << rows;
    EXPECT_EQ(dweight2, dweight1) << rows;
  }
}

// Widths below, at and between multiples of the 16 partial sums a row is summed in: the values
// against the definition in double, the gradients against differences.
TEST(GradientCheck, LayerNormOfEveryWidthAgainstDouble) {
  for (const std::size_t channels :
       {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{37}, std::size_t{768}}) {
    const std::size_t rows = 3;
    std::vector<float> inp = random_values(rows * channels, 11, 3.0F);
    for (float& v : inp) v += 5.0F;  // a mean far from zero
    std::vector<float> weight = random_values(channels, 12);
    std::vector<float> bias = random_values(channels, 13);
    std::vector<float> y(inp.size()), mean(rows), rstd(rows);
    layernorm_forward(y.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                      rows, channels);
    for (std::size_t r = 0; r < rows; ++r) {
      double m = 0, var = 0;
      for (std::size_t c = 0; c < channels; ++c) m += inp[r * channels + c];
      m /= static_cast<double>(channels);
      for (std::size_t c = 0; c < channels; ++c) {
        var += (inp[r * channels + c] - m) * (inp[r * channels + c] - m);
      }
      const double s = 1.0 / std::sqrt(var / static_cast<double>(channels) + 1e-5);
      EXPECT_NEAR(mean[r], m, 1e-5 * std::abs(m)) << channels;
      EXPECT_NEAR(rstd[r], s, 1e-5 * s) << channels;
      for (std::size_t c = 0; c < channels; ++c) {
        const double want = (inp[r * channels + c] - m) * s * weight[c] + bias[c];
        EXPECT_NEAR(y[r * channels + c], want, 1e-4 * std::max(1.0, std::abs(want)))
            << channels << " row " << r << " column " << c;
      }
    }
    if (channels > 37) continue;  // differences of every element: the small widths suffice
    const std::vector<float> probe = random_values(rows * channels, 14);
    const auto loss = [&] {
      layernorm_forward(y.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                        rows, channels);
      return weighted_sum(y, probe);
    };
    (void)loss();
    std::vector<float> dinp(inp.size()), dweight(channels), dbias(channels);
    layernorm_backward(dinp.data(), dweight.data(), dbias.data(), probe.data(), inp.data(),
                       weight.data(), mean.data(), rstd.data(), rows, channels);
    // A width of one normalises every row to zero: the input's gradient is zero.
    expect_gradient(inp, dinp, loss, "dinp " + std::to_string(channels), 1e-2F, 2e-2);
    expect_gradient(weight, dweight, loss, "dweight " + std::to_string(channels));
    expect_gradient(bias, dbias, loss, "dbias " + std::to_string(channels));
  }
}

// The weight's and bias's gradients over rows in several blocks of partial sums, the last one
// short (150 rows = 2 x 64 + 22), added to what the gradients held, against double.
TEST(LayerNorm, WeightAndBiasGradientsOverSeveralRowBlocks) {
  const std::size_t rows = 150, channels = 40;
  const std::vector<float> inp = random_values(rows * channels, 31, 2.0F);
  const std::vector<float> dout = random_values(rows * channels, 32);
  const std::vector<float> weight = random_values(channels, 33);
  std::vector<float> y(inp.size()), mean(rows), rstd(rows);
  layernorm_forward(y.data(), mean.data(), rstd.data(), inp.data(), weight.data(), weight.data(),
                    rows, channels);
  std::vector<float> dinp(inp.size()), dweight(channels, 0.25F), dbias(channels, -0.5F);
  layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                     weight.data(), mean.data(), rstd.data(), rows, channels);
  for (std::size_t c = 0; c < channels; ++c) {
    double want_weight = 0.25, want_bias = -0.5;
    for (std::size_t r = 0; r < rows; ++r) {
      const double norm = (inp[r * channels + c] - static_cast<double>(mean[r])) * rstd[r];
      want_weight += norm * dout[r * channels + c];
      want_bias += dout[r * channels + c];
    }
    EXPECT_NEAR(dweight[c], want_weight, 1e-4 * std::max(1.0, std::abs(want_weight))) << c;
    EXPECT_NEAR(dbias[c], want_bias, 1e-4 * std::max(1.0, std::abs(want_bias))) << c;
  }
}

// The residual add fused into the LayerNorm that reads it gives what the two kernels give.
TEST(LayerNorm, TheFusedResidualAddGivesTheSameBits) {
  for (const std::size_t channels : {std::size_t{37}, std::size_t{128}}) {
    const std::size_t rows = 70;
    const std::vector<float> a = random_values(rows * channels, 15);
    const std::vector<float> b = random_values(rows * channels, 16);
    const std::vector<float> weight = random_values(channels, 17);
    const std::vector<float> bias = random_values(channels, 18);
    std::vector<float> sum1(a.size()), y1(a.size()), mean1(rows), rstd1(rows);
    residual_forward(sum1.data(), a.data(), b.data(), a.size());
    layernorm_forward(y1.data(), mean1.data(), rstd1.data(), sum1.data(), weight.data(),
                      bias.data(), rows, channels);
    std::vector<float> sum2(a.size()), y2(a.size()), mean2(rows), rstd2(rows);
    residual_layernorm_forward(sum2.data(), y2.data(), mean2.data(), rstd2.data(), a.data(),
                               b.data(), weight.data(), bias.data(), rows, channels);
    EXPECT_EQ(sum2, sum1) << channels;
    EXPECT_EQ(y2, y1) << channels;
    EXPECT_EQ(mean2, mean1) << channels;
    EXPECT_EQ(rstd2, rstd1) << channels;
  }
}

TEST(GradientCheck, CausalAttention) {
  const std::size_t batch = 2, seq = 5, channels = 8, heads = 2;
  std::vector<float> qkv = random_values(batch * seq * 3 * channels, 9);
  const std::vector<float> probe = random_values(batch * seq * channels, 10);
  std::vector<float> y(batch * seq * channels), lse(batch * heads * seq);
  const auto loss = [&] {
    attention_forward(y.data(), lse.data(), qkv.data(), batch, seq, channels, heads);
    return weighted_sum(y, probe);
  };
  (void)loss();
  // Causal: the first position attends only to itself, so its output is its own value, and its
  // log-sum-exp is its one scaled score.
  for (std::size_t c = 0; c < channels; ++c) EXPECT_NEAR(y[c], qkv[2 * channels + c], 1e-6);
  double self = 0;
  for (std::size_t d = 0; d < channels / heads; ++d) {
    self += static_cast<double>(qkv[d]) * qkv[channels + d];
  }
  EXPECT_NEAR(lse[0], self / std::sqrt(channels / heads), 1e-5);
  std::vector<float> dqkv(qkv.size());
  attention_backward(dqkv.data(), probe.data(), qkv.data(), y.data(), lse.data(), batch, seq,
                     channels, heads);
  expect_gradient(qkv, dqkv, loss, "dqkv");
}

// Attention as a whole matrix, in double: what the tiles must give.
void attention_reference(std::vector<double>& out, std::vector<double>& dqkv,
                         const std::vector<float>& qkv, const std::vector<float>& dout,
                         std::size_t batch, std::size_t seq, std::size_t channels,
                         std::size_t heads) {
  const std::size_t hs = channels / heads, row = 3 * channels;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  out.assign(batch * seq * channels, 0.0);
  dqkv.assign(qkv.size(), 0.0);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t h = 0; h < heads; ++h) {
      const auto q = [&](std::size_t t, std::size_t d) {
        return double{qkv[(b * seq + t) * row + h * hs + d]};
      };
      const auto k = [&](std::size_t t, std::size_t d) {
        return double{qkv[(b * seq + t) * row + channels + h * hs + d]};
      };
      const auto v = [&](std::size_t t, std::size_t d) {
        return double{qkv[(b * seq + t) * row + 2 * channels + h * hs + d]};
      };
      for (std::size_t t = 0; t < seq; ++t) {
        std::vector<double> w(t + 1);
        double largest = -1e300, sum = 0;
        for (std::size_t u = 0; u <= t; ++u) {
          for (std::size_t d = 0; d < hs; ++d) w[u] += q(t, d) * k(u, d) * scale;
          largest = std::max(largest, w[u]);
        }
        for (double& x : w) sum += (x = std::exp(x - largest));
        for (double& x : w) x /= sum;
        const auto dy = [&](std::size_t d) {
          return double{dout[(b * seq + t) * channels + h * hs + d]};
        };
        std::vector<double> dw(t + 1);
        double weighted = 0;
        for (std::size_t u = 0; u <= t; ++u) {
          for (std::size_t d = 0; d < hs; ++d) {
            out[(b * seq + t) * channels + h * hs + d] += w[u] * v(u, d);
            dqkv[(b * seq + u) * row + 2 * channels + h * hs + d] += w[u] * dy(d);
            dw[u] += dy(d) * v(u, d);
          }
          weighted += w[u] * dw[u];
        }
        for (std::size_t u = 0; u <= t; ++u) {
          const double ds = w[u] * (dw[u] - weighted) * scale;
          for (std::size_t d = 0; d < hs; ++d) {
            dqkv[(b * seq + t) * row + h * hs + d] += ds * k(u, d);
            dqkv[(b * seq + u) * row + channels + h * hs + d] += ds * q(t, d);
          }
        }
      }
    }
  }
}

// Backward that writes dqkv gives the bits of backward adding into zeros, whatever the buffer
// held (NaN here), with sequences of one tile, of several query tiles in one key tile, and of
// several key tiles (256 keys each) with a partial last one of each.
TEST(Attention, BackwardCanWriteTheGradient) {
  for (const std::size_t seq :
       {std::size_t{5}, std::size_t{64}, std::size_t{150}, std::size_t{600}}) {
    const std::size_t batch = 2, channels = 16, heads = 2;
    const std::vector<float> qkv = random_values(batch * seq * 3 * channels, 21);
    const std::vector<float> dout = random_values(batch * seq * channels, 22);
    std::vector<float> out(batch * seq * channels), lse(batch * heads * seq);
    attention_forward(out.data(), lse.data(), qkv.data(), batch, seq, channels, heads);
    std::vector<float> added(qkv.size(), 0.0F);
    attention_backward(added.data(), dout.data(), qkv.data(), out.data(), lse.data(), batch, seq,
                       channels, heads);
    std::vector<float> written(qkv.size(), std::numeric_limits<float>::quiet_NaN());
    attention_backward(written.data(), dout.data(), qkv.data(), out.data(), lse.data(), batch, seq,
                       channels, heads, InputGradient::kOverwrite);
    EXPECT_EQ(written, added) << seq;
  }
}

// Query tiles of 64 and key tiles of 256, the last of each short (600 = 9 x 64 + 24 = 2 x 256
// + 88): the online softmax across key tiles, the key tiles cut at each query tile's last key,
// the masked diagonals and the skipped tiles above give the whole matrix's results.
TEST(Attention, TilesGiveTheWholeMatrixResults) {
  for (const std::size_t seq : {std::size_t{150}, std::size_t{600}}) {
    const std::size_t batch = 2, channels = 16, heads = 2;
    const std::vector<float> qkv = random_values(batch * seq * 3 * channels, 21, 1.5F);
    const std::vector<float> dout = random_values(batch * seq * channels, 22);
    std::vector<double> want_out, want_dqkv;
    attention_reference(want_out, want_dqkv, qkv, dout, batch, seq, channels, heads);
    std::vector<float> out(batch * seq * channels), lse(batch * heads * seq);
    std::vector<float> dqkv(qkv.size(), 0.5F);  // backward adds
    attention_forward(out.data(), lse.data(), qkv.data(), batch, seq, channels, heads);
    attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), batch, seq,
                       channels, heads);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want_out[i], 2e-5) << i;
    for (std::size_t i = 0; i < dqkv.size(); ++i) {
      ASSERT_NEAR(dqkv[i], want_dqkv[i] + 0.5, 1e-4) << seq << " " << i;
    }
  }
}

TEST(GradientCheck, GeluAndResidual) {
  std::vector<float> inp = random_values(64, 11, 2.0F);
  const std::vector<float> probe = random_values(64, 12);
  std::vector<float> y(64);
  const auto loss = [&] {
    gelu_forward(y.data(), inp.data(), inp.size());
    return weighted_sum(y, probe);
  };
  (void)loss();
  EXPECT_NEAR(
      y[0],
      0.5 * inp[0] * (1 + std::tanh(0.7978845608 * (inp[0] + 0.044715 * std::pow(inp[0], 3)))),
      1e-5);
  std::vector<float> dinp(64);
  gelu_backward(dinp.data(), inp.data(), probe.data(), inp.size());
  // Written over NaN, the same gradient as added to zeros.
  std::vector<float> written(inp.size(), std::numeric_limits<float>::quiet_NaN());
  gelu_backward(written.data(), inp.data(), probe.data(), inp.size(), InputGradient::kOverwrite);
  EXPECT_EQ(written, dinp);
  expect_gradient(inp, dinp, loss, "gelu dinp", 1e-3F);
  // A diverged model's values: NaN stays NaN, huge values stay finite or infinite as GELU's
  // limits say, and nothing is undefined (UBSan runs this).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> extreme{nan, -nan, 1e30F, -1e30F, 100.0F, -100.0F, inf};
  std::vector<float> out(extreme.size());
  gelu_forward(out.data(), extreme.data(), extreme.size());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 1e30F);
  EXPECT_EQ(out[4], 100.0F);
  EXPECT_EQ(out[5], -0.0F);
  EXPECT_EQ(out[6], inf);

  std::vector<float> a = random_values(16, 13), b = random_values(16, 14), sum(16);
  residual_forward(sum.data(), a.data(), b.data(), 16);
  EXPECT_EQ(sum[3], a[3] + b[3]);
  std::vector<float> da(16), db(16);
  residual_backward(da.data(), db.data(), probe.data(), 16);
  EXPECT_EQ(da[5], probe[5]);
  EXPECT_EQ(db[5], probe[5]);
}

TEST(GradientCheck, Embedding) {
  const std::size_t batch = 2, seq = 4, channels = 3, vocab = 6;
  const std::vector<std::int32_t> tokens{1, 5, 1, 0, 2, 2, 5, 3};  // repeats add up
  std::vector<float> wte = random_values(vocab * channels, 15);
  std::vector<float> wpe = random_values(seq * channels, 16);
  const std::vector<float> probe = random_values(batch * seq * channels, 17);
  std::vector<float> y(batch * seq * channels);
  const auto loss = [&] {
    embedding_forward(y.data(), tokens.data(), wte.data(), wpe.data(), batch, seq, channels);
    return weighted_sum(y, probe);
  };
  (void)loss();
  std::vector<float> dwte(wte.size()), dwpe(wpe.size());
  embedding_backward(dwte.data(), dwpe.data(), probe.data(), tokens.data(), batch, seq, channels);
  expect_gradient(wte, dwte, loss, "dwte");
  expect_gradient(wpe, dwpe, loss, "dwpe");
}

// The row steps a vocabulary split over ranks composes (tensor parallelism's head) give the
// fused kernel's softmax and loss: two halves of a vocabulary of 300, the largest logit and the
// sums combined across them as the all-reduces would.
TEST(SoftmaxCrossEntropy, TheRowStepsOverASplitVocabularyGiveTheFusedResult) {
  const std::size_t rows = 5, vocab = 300, half = vocab / 2;
  const std::vector<float> logits = random_values(rows * vocab, 31, 4.0F);
  std::vector<std::int32_t> targets(rows);
  for (std::size_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>(r * 71 % vocab);
  std::vector<float> losses(rows), probs(rows * vocab);
  softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                                vocab);
  std::vector<std::vector<float>> parts(2, std::vector<float>(rows * half));
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t k = 0; k < 2; ++k) {
      std::copy_n(logits.begin() + static_cast<std::ptrdiff_t>(r * vocab + k * half), half,
                  parts[k].begin() + static_cast<std::ptrdiff_t>(r * half));
    }
  }
  std::vector<float> largest(rows), other(rows);
  softmax_row_largest(largest.data(), parts[0].data(), rows, half);
  softmax_row_largest(other.data(), parts[1].data(), rows, half);
  for (std::size_t r = 0; r < rows; ++r) largest[r] = std::max(largest[r], other[r]);
  std::vector<std::vector<float>> part_probs(2, std::vector<float>(rows * half));
  std::vector<float> sums(rows), more(rows);
  softmax_row_exponentials(part_probs[0].data(), sums.data(), parts[0].data(), largest.data(), rows,
                           half);
  softmax_row_exponentials(part_probs[1].data(), more.data(), parts[1].data(), largest.data(), rows,
                           half);
  for (std::size_t r = 0; r < rows; ++r) sums[r] += more[r];
  for (std::size_t k = 0; k < 2; ++k) {
    softmax_row_normalise(part_probs[k].data(), sums.data(), rows, half);
  }
  for (std::size_t r = 0; r < rows; ++r) {
    const auto t = static_cast<std::size_t>(targets[r]);
    const float loss = std::log(sums[r]) + largest[r] - logits[r * vocab + t];
    EXPECT_NEAR(loss, losses[r], 1e-5F * std::max(1.0F, std::abs(losses[r]))) << "row " << r;
    for (std::size_t v = 0; v < vocab; ++v) {
      const float split = part_probs[v / half][r * half + v % half];
      EXPECT_NEAR(split, probs[r * vocab + v], 1e-6F) << "row " << r << " column " << v;
    }
  }
}

TEST(GradientCheck, SoftmaxCrossEntropy) {
  const std::size_t rows = 4, vocab = 7;
  std::vector<float> logits = random_values(rows * vocab, 18, 2.0F);
  const std::vector<std::int32_t> targets{0, 6, 3, 3};
  std::vector<float> losses(rows), probs(logits.size());
  const auto loss = [&] {
    softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                                  vocab);
    double mean = 0;
    for (float l : losses) mean += l;
    return mean / static_cast<double>(rows);
  };
  (void)loss();
  const std::vector<float> dlosses(rows, 1.0F / static_cast<float>(rows));
  std::vector<float> dlogits(logits.size());
  softmax_cross_entropy_backward(dlogits.data(), dlosses.data(), probs.data(), targets.data(), rows,
                                 vocab);
  expect_gradient(logits, dlogits, loss, "dlogits");
  // Uniform logits: the loss is log(vocab) and the probabilities 1 / vocab.
  const std::vector<float> flat(vocab, 0.25F);
  std::vector<float> one(1), p(vocab);
  const std::int32_t target = 2;
  softmax_cross_entropy_forward(one.data(), p.data(), flat.data(), &target, 1, vocab);
  EXPECT_NEAR(one[0], std::log(7.0), 1e-6);
  EXPECT_NEAR(p[4], 1.0 / 7.0, 1e-7);
  // Logits far apart: the loss stays finite where the target's probability underflows.
  const std::vector<float> apart{0.0F, 200.0F};
  std::vector<float> p2(2);
  const std::int32_t low = 0;
  softmax_cross_entropy_forward(one.data(), p2.data(), apart.data(), &low, 1, 2);
  EXPECT_NEAR(one[0], 200.0, 1e-3);
}

// Ignored targets: their rows' losses are 0 and their logits get no gradient, and the gradient
// of the counted rows' mean (dlosses 1 / counted on them) is the numerical one.
TEST(GradientCheck, SoftmaxCrossEntropyWithIgnoredTargets) {
  const std::size_t rows = 5, vocab = 6;
  std::vector<float> logits = random_values(rows * vocab, 23, 2.0F);
  const std::vector<std::int32_t> targets{kIgnoredTarget, 4, kIgnoredTarget, 0, 5};
  std::vector<float> losses(rows, -1.0F), probs(logits.size());
  const auto loss = [&] {
    softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                                  vocab);
    double sum = 0;
    for (float l : losses) sum += l;
    return sum / 3.0;
  };
  (void)loss();
  EXPECT_EQ(losses[0], 0.0F);
  EXPECT_EQ(losses[2], 0.0F);
  EXPECT_GT(losses[1], 0.0F);
  // dlosses is the same on every row: the ignored ones must still get nothing.
  const std::vector<float> dlosses(rows, 1.0F / 3.0F);
  std::vector<float> dlogits(logits.size(), 0.0F);
  softmax_cross_entropy_backward(dlogits.data(), dlosses.data(), probs.data(), targets.data(), rows,
                                 vocab);
  for (std::size_t v = 0; v < vocab; ++v) {
    EXPECT_EQ(dlogits[v], 0.0F) << v;
    EXPECT_EQ(dlogits[2 * vocab + v], 0.0F) << v;
  }
  expect_gradient(logits, dlogits, loss, "dlogits");
}

}  // namespace
}  // namespace shardwise::kernels

// The kernels split their loops among the rank's threads into contiguous ranges, and column
// sums column by column, so that their results do not depend on how many threads run them or on
// which thread takes which range: the same bits on one thread as on four.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/embedding.hpp"
#include "shardwise/kernels/layernorm.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels {
namespace {

std::vector<float> values(std::size_t count, float seed) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(((i * 2654435761U) % 1000) / 500.0) - 1.0F + seed;
  }
  return out;
}

// Runs `kernel` on `threads` threads and returns what it wrote.
template <class Kernel>
std::vector<std::vector<float>> on_threads(int threads, Kernel&& kernel) {
  const int before = blas_threads();
  set_blas_threads(threads);
  std::vector<std::vector<float>> out = kernel();
  set_blas_threads(before);
  return out;
}

TEST(KernelThreads, LayerNormEmbeddingAndBiasGradientsDoNotDependOnTheThreadCount) {
  constexpr std::size_t kRows = 512;
  constexpr std::size_t kChannels = 256;
  const std::vector<float> inp = values(kRows * kChannels, 0.1F);
  const std::vector<float> dout = values(kRows * kChannels, -0.2F);
  const std::vector<float> weight = values(kChannels, 1.0F);
  std::vector<std::int32_t> tokens(kRows);
  for (std::size_t i = 0; i < kRows; ++i) tokens[i] = static_cast<std::int32_t>(i * 7 % 50);
  const auto run = [&] {
    std::vector<float> out(kRows * kChannels), mean(kRows), rstd(kRows);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                      weight.data(), kRows, kChannels);
    std::vector<float> dinp(kRows * kChannels), dweight(kChannels), dbias(kChannels);
    layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                       weight.data(), mean.data(), rstd.data(), kRows, kChannels);
    std::vector<float> dwte(50 * kChannels), dwpe(16 * kChannels);
    embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kRows / 16, 16,
                       kChannels);
    // The bias gradient of a product (its input and weight gradients are the BLAS's).
    std::vector<float> mdinp(kRows * kChannels), mdweight(kChannels * kChannels);
    std::vector<float> mdbias(kChannels);
    matmul_backward(mdinp.data(), mdweight.data(), mdbias.data(), dout.data(), inp.data(),
                    values(kChannels * kChannels, 0.0F).data(), kRows, kChannels, kChannels);
    return std::vector<std::vector<float>>{out,   mean, rstd, dinp,  dweight,
                                           dbias, dwte, dwpe, mdbias};
  };
  const auto one = on_threads(1, run);
  const auto four = on_threads(4, run);
  ASSERT_EQ(one.size(), four.size());
  for (std::size_t k = 0; k < one.size(); ++k) EXPECT_EQ(one[k], four[k]) << "output " << k;
}

// Each (sequence, head) of the tiled attention runs on one thread in a fixed order, and its
// products on that thread alone: the same bits on one thread as on four, with more (sequence,
// head) pairs than threads and with fewer.
TEST(KernelThreads, AttentionDoesNotDependOnTheThreadCount) {
  for (const std::size_t batch : {std::size_t{1}, std::size_t{3}}) {
    const std::size_t seq = 300, channels = 32, heads = 2;  // two key tiles
    const std::vector<float> qkv = values(batch * seq * 3 * channels, 0.05F);
    const std::vector<float> dout = values(batch * seq * channels, -0.1F);
    const auto run = [&] {
      std::vector<float> out(batch * seq * channels), lse(batch * heads * seq);
      attention_forward(out.data(), lse.data(), qkv.data(), batch, seq, channels, heads);
      std::vector<float> dqkv(qkv.size());
      attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), batch, seq,
                         channels, heads);
      return std::vector<std::vector<float>>{out, lse, dqkv};
    };
    const auto one = on_threads(1, run);
    const auto four = on_threads(4, run);
    for (std::size_t k = 0; k < one.size(); ++k) {
      EXPECT_EQ(one[k], four[k]) << "batch " << batch << " output " << k;
    }
  }
}

}  // namespace
}  // namespace shardwise::kernels

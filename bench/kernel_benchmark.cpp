// The GPT's element-wise and row kernels (everything but the matrix products) at the shapes of
// one layer of `tiny` (rows 768, channels 128) and `small` (rows 4096, channels 384), and the
// attention also at one sequence of `gpt2`'s (context 1024, channels 768, 12 heads), on one
// thread: the part of a step that is this project's own code, measured kernel by kernel. Built by
// the `bench` preset, or against the release build:
//   g++ -O2 -std=c++20 -Iinclude bench/kernel_benchmark.cpp
//   build/release/src/libshardwise_kernels.a
//       build/release/src/libshardwise_core.a -lbenchmark -lre2 -ldnnl -lgomp -lpthread
//       -o build/kernel_benchmark   (one command)
// The attention benchmarks take a fifth argument: 1 runs bf16 attention (AttentionLayout::bf16,
// AMX's tiles where the CPU has them) on the bf16 roundings of the same q, k and v.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardwise/kernels/adamw.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/layernorm.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/kernels/sum_of_squares.hpp"

namespace {

namespace k = shardwise::kernels;

// Deterministic values in [-1, 1).
std::vector<float> filled(std::size_t count, std::uint32_t seed) {
  std::vector<float> v(count);
  for (auto& x : v) {
    seed = seed * 1664525U + 1013904223U;
    x = static_cast<float>(seed >> 8) / 8388608.0F - 1.0F;
  }
  return v;
}

std::size_t arg(const benchmark::State& state, int i) {
  return static_cast<std::size_t>(state.range(i));
}

void set_bytes(benchmark::State& state, std::size_t bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes_per_iteration));
}

void BM_LayerNormForward(benchmark::State& state) {
  k::set_blas_threads(1);
  const std::size_t rows = arg(state, 0), channels = arg(state, 1);
  auto inp = filled(rows * channels, 1), w = filled(channels, 2), b = filled(channels, 3);
  std::vector<float> out(rows * channels), mean(rows), rstd(rows);
  for (auto _ : state) {
    k::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), rows,
                         channels);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * rows * channels * sizeof(float));
}

void BM_LayerNormBackward(benchmark::State& state) {
  k::set_blas_threads(1);
  const std::size_t rows = arg(state, 0), channels = arg(state, 1);
  auto inp = filled(rows * channels, 1), w = filled(channels, 2), b = filled(channels, 3);
  auto dout = filled(rows * channels, 4);
  std::vector<float> out(rows * channels), mean(rows), rstd(rows), dinp(rows * channels),
      dw(channels), db(channels);
  k::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), rows,
                       channels);
  for (auto _ : state) {
    k::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                          mean.data(), rstd.data(), rows, channels);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 3 * rows * channels * sizeof(float));
}

void BM_GeluForward(benchmark::State& state) {
  k::set_blas_threads(1);
  const std::size_t count = arg(state, 0);
  auto inp = filled(count, 1);
  std::vector<float> out(count);
  for (auto _ : state) {
    k::gelu_forward(out.data(), inp.data(), count);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * count * sizeof(float));
}

void BM_GeluBackward(benchmark::State& state) {
  k::set_blas_threads(1);
  const std::size_t count = arg(state, 0);
  auto inp = filled(count, 1), dout = filled(count, 2);
  std::vector<float> dinp(count);
  for (auto _ : state) {
    k::gelu_backward(dinp.data(), inp.data(), dout.data(), count, k::InputGradient::kOverwrite);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 3 * count * sizeof(float));
}

// GPT-2's packed q, k and v (every head its own keys and values), in the precision arg 4 names.
k::AttentionLayout packed_attention(benchmark::State& state) {
  const std::size_t batch = arg(state, 0), seq = arg(state, 1), channels = arg(state, 2),
                    heads = arg(state, 3);
  return {
      batch, seq, heads, heads, channels / heads, 3 * channels, 3 * channels, arg(state, 4) != 0};
}

// q, k and v packed; bf16 attention reads their bf16 roundings, as training gives it.
std::vector<float> packed_qkv(const k::AttentionLayout& layout) {
  auto qkv = filled(layout.batch * layout.seq * layout.q_stride, 1);
  if (layout.bf16) k::round_to_bf16(qkv);
  return qkv;
}

void BM_AttentionForward(benchmark::State& state) {
  k::set_blas_threads(1);
  const k::AttentionLayout layout = packed_attention(state);
  const std::size_t channels = layout.heads * layout.head_size;
  const auto qkv = packed_qkv(layout);
  std::vector<float> out(layout.batch * layout.seq * channels),
      lse(layout.batch * layout.heads * layout.seq);
  for (auto _ : state) {
    k::attention_forward(out.data(), lse.data(), qkv.data(), qkv.data() + channels,
                         qkv.data() + 2 * channels, layout);
    benchmark::ClobberMemory();
  }
}

void BM_AttentionBackward(benchmark::State& state) {
  k::set_blas_threads(1);
  const k::AttentionLayout layout = packed_attention(state);
  const std::size_t channels = layout.heads * layout.head_size;
  const auto qkv = packed_qkv(layout);
  const auto dout = filled(layout.batch * layout.seq * channels, 2);
  std::vector<float> out(layout.batch * layout.seq * channels),
      lse(layout.batch * layout.heads * layout.seq), dqkv(qkv.size());
  k::attention_forward(out.data(), lse.data(), qkv.data(), qkv.data() + channels,
                       qkv.data() + 2 * channels, layout);
  for (auto _ : state) {
    k::attention_backward(dqkv.data(), dqkv.data() + channels, dqkv.data() + 2 * channels,
                          dout.data(), qkv.data(), qkv.data() + channels, qkv.data() + 2 * channels,
                          out.data(), lse.data(), layout, k::InputGradient::kOverwrite);
    benchmark::ClobberMemory();
  }
}

void BM_CrossEntropy(benchmark::State& state) {
  k::set_blas_threads(1);
  const std::size_t rows = arg(state, 0), vocab = arg(state, 1);
  auto logits = filled(rows * vocab, 1);
  std::vector<std::int32_t> targets(rows);
  for (std::size_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>(r * 7 % vocab);
  std::vector<float> losses(rows), probs(rows * vocab), dlogits(rows * vocab), dlosses(rows, 1.0F);
  for (auto _ : state) {
    k::softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(),
                                     rows, vocab);
    k::softmax_cross_entropy_backward(dlogits.data(), dlosses.data(), probs.data(), targets.data(),
                                      rows, vocab);
    benchmark::ClobberMemory();
  }
}

void BM_AdamW(benchmark::State& state) {
  k::set_blas_threads(1);
  const std::size_t count = arg(state, 0);
  auto params = filled(count, 1), grads = filled(count, 2);
  std::vector<float> m(count), v(count);
  std::int64_t step = 0;
  for (auto _ : state) {
    k::adamw_update(params.data(), grads.data(), m.data(), v.data(), count, {}, ++step);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4 * count * sizeof(float));
}

void BM_SumOfSquares(benchmark::State& state) {
  k::set_blas_threads(1);
  const std::size_t count = arg(state, 0);
  const auto x = filled(count, 1);
  for (auto _ : state) benchmark::DoNotOptimize(k::sum_of_squares(x.data(), count));
  set_bytes(state, count * sizeof(float));
}

}  // namespace

BENCHMARK(BM_LayerNormForward)->Args({768, 128})->Args({4096, 384});
BENCHMARK(BM_LayerNormBackward)->Args({768, 128})->Args({4096, 384});
BENCHMARK(BM_GeluForward)->Arg(768 * 512)->Arg(4096 * 1536);
BENCHMARK(BM_GeluBackward)->Arg(768 * 512)->Arg(4096 * 1536);
BENCHMARK(BM_AttentionForward)
    ->Args({12, 64, 128, 4, 0})
    ->Args({16, 256, 384, 6, 0})
    ->Args({1, 1024, 768, 12, 0})
    ->Args({16, 256, 384, 6, 1})
    ->Args({1, 1024, 768, 12, 1});
BENCHMARK(BM_AttentionBackward)
    ->Args({12, 64, 128, 4, 0})
    ->Args({16, 256, 384, 6, 0})
    ->Args({1, 1024, 768, 12, 0})
    ->Args({16, 256, 384, 6, 1})
    ->Args({1, 1024, 768, 12, 1});
BENCHMARK(BM_CrossEntropy)->Args({768, 256})->Args({4096, 256});
BENCHMARK(BM_SumOfSquares)->Arg(65536)->Arg(800000);
BENCHMARK(BM_AdamW)->Arg(800000)->Arg(10844160);

BENCHMARK_MAIN();

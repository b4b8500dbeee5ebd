// A Mixture-of-Experts layer's forward and backward (the training layer's own part, the router
// and grouped experts) against a dense gated MLP doing the same products per token (width k x
// the experts' width), on the same rows and threads, float32:
//   moe_layer TOKENS HIDDEN EXPERT_WIDTH EXPERTS K THREADS
// Prints one JSON line: each layer's median milliseconds over 7 timed calls after 2 warm ones,
// and the ratio. bench/compare_moe.sh runs it beside transformers' MixtralSparseMoeBlock.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "shardwise/kernels/matmul.hpp"
#include "train/transformer/mlp_part.hpp"

namespace {

using shardwise::Precision;
using shardwise::TransformerShape;
using shardwise::train::ParameterInit;
using shardwise::train::ParameterSpec;
using shardwise::train::ParameterStore;
using shardwise::train::TensorParallel;
using namespace shardwise::train::transformer;

std::size_t arg(char** argv, int i) { return static_cast<std::size_t>(std::atoll(argv[i])); }

// Median milliseconds of forward + backward of `mlp` over `tokens` rows.
double time_layer(const TransformerShape& shape, std::vector<ParameterSpec> specs,
                  std::size_t tokens) {
  ParameterStore store(std::move(specs));
  store.initialize_on_use(1);
  const std::vector<std::size_t> index{0, 1, 2};
  const ParameterView p(store, index, 0, Precision::kFp32);
  const ModelAxis axis(TensorParallel(), false, shape.hidden, Precision::kFp32,
                       shardwise::DType::kF32);
  const MlpPart mlp(shape, axis);
  const std::size_t C = shape.hidden;
  std::vector<float> normed(tokens * C), out(tokens * C), dout(tokens * C), dnormed(tokens * C);
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  for (float& v : normed) v = normal(gen);
  for (float& v : dout) v = normal(gen);
  std::vector<float> arrays(tokens * shape.mlp_row_elements(1));
  std::vector<float> router(tokens * shape.experts);
  std::vector<float> scratch(shape.mlp == shardwise::MlpKind::kGelu ? tokens * shape.mlp_width : 0);
  const Rows rows{1, tokens, tokens, tokens};
  std::vector<double> times;
  for (int call = 0; call < 9; ++call) {
    store.zero_grads();
    const auto start = std::chrono::steady_clock::now();
    mlp.forward(out.data(), arrays.data(), router.data(), normed.data(), p, rows);
    mlp.backward(dnormed.data(), scratch.data(), dout.data(), arrays.data(), router.data(),
                 normed.data(), p, rows);
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (call >= 2) times.push_back(took.count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: moe_layer TOKENS HIDDEN EXPERT_WIDTH EXPERTS K THREADS\n");
    return 2;
  }
  const std::size_t tokens = arg(argv, 1), C = arg(argv, 2), I = arg(argv, 3), E = arg(argv, 4),
                    k = arg(argv, 5);
  shardwise::kernels::set_blas_threads(static_cast<int>(arg(argv, 6)));
  const auto c = static_cast<std::int64_t>(C), i = static_cast<std::int64_t>(I),
             e = static_cast<std::int64_t>(E), w = static_cast<std::int64_t>(I * k);
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.02F};
  TransformerShape moe;
  moe.hidden = C;
  moe.mlp = shardwise::MlpKind::kGatedSilu;
  moe.mlp_width = I;
  moe.experts = E;
  moe.experts_per_token = k;
  moe.expert_width = I;
  moe.renormalize_routing = true;
  const double moe_ms = time_layer(moe,
                                   {{"gate", {e, c}, {}, normal},
                                    {"gate_up", {e, 2 * i, c}, {}, normal},
                                    {"down", {e, c, i}, {}, normal}},
                                   tokens);
  TransformerShape dense = moe;
  dense.experts = dense.experts_per_token = dense.expert_width = 0;
  dense.mlp_width = I * k;
  const double dense_ms = time_layer(
      dense,
      {{"gate", {w, c}, {}, normal}, {"up", {w, c}, {}, normal}, {"down", {c, w}, {}, normal}},
      tokens);
  std::printf(
      "{\"tokens\": %zu, \"hidden\": %zu, \"expert_width\": %zu, \"experts\": %zu, \"k\": %zu, "
      "\"moe_ms\": %.3f, \"dense_same_flops_ms\": %.3f, \"moe_over_dense\": %.3f}\n",
      tokens, C, I, E, k, moe_ms, dense_ms, moe_ms / dense_ms);
  return 0;
}

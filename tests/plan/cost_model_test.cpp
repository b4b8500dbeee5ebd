// The planner's formulas against their sources' worked examples: ZeRO's memory per device
// (Rajbhandari et al. 2020, figure 1: 7.5B parameters on 64 devices), activations per layer
// (Korthikanti et al. 2022: GPT-3 175B with t = 8), FLOPs per step (Narayanan et al. 2021,
// equations 2 and 3), and the pipeline bubble.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "error_of.hpp"
#include "shardwise/plan/cost_model.hpp"
#include "shardwise/plan/search.hpp"

namespace shardwise::plan {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// A GPT-3-like shape with exactly `parameters` in one layer's matrices.
ModelShape one_block(std::int64_t parameters) {
  ModelShape m;
  m.layers = 1;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 32;
  m.head_dim = 128;
  m.ffn = 4 * 4096;
  m.vocab = 50000;
  m.parameters = parameters;
  m.layer_parameters = parameters;
  m.layer_matmul_parameters = parameters;
  m.matmul_parameters = parameters;
  m.units = {{"layer 0", true, {Shape{parameters}}}};
  return m;
}

// GPT-3 175B as Korthikanti and Narayanan describe it: a = 96, h = 12288, l = 96, V = 51200.
ModelShape gpt3_175b() {
  ModelShape m;
  m.layers = 96;
  m.hidden = 12288;
  m.heads = 96;
  m.kv_heads = 96;
  m.head_dim = 128;
  m.ffn = 4 * 12288;
  m.vocab = 51200;
  m.layer_matmul_parameters = 12 * m.hidden * m.hidden;
  m.layer_parameters = m.layer_matmul_parameters;
  m.matmul_parameters = m.layers * m.layer_matmul_parameters + m.vocab * m.hidden;
  m.parameters = m.layers * m.layer_parameters + m.vocab * m.hidden;
  m.tied_embeddings = true;
  const std::int64_t h = m.hidden;
  m.units.push_back({"embeddings", false, {Shape{m.vocab, h}}});
  for (std::int64_t l = 0; l < m.layers; ++l) {
    m.units.push_back({"layer " + std::to_string(l),
                       true,
                       {Shape{3 * h, h}, Shape{h, h}, Shape{4 * h, h}, Shape{h, 4 * h}}});
  }
  return m;
}

Cluster devices(std::int64_t n) { return Cluster::preset("a100-80gb", n, 8); }

// Figure 1 of the ZeRO paper: Psi = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
TEST(CostModel, ZeroStagesReproduceTheZeroPaper) {
  const ModelShape model = one_block(7'500'000'000);
  TrainingSetup setup;
  setup.global_batch = 64;
  setup.seq = 1024;
  const double expected[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int zero = 0; zero <= 3; ++zero) {
    Layout layout;
    layout.data = 64;
    layout.zero = zero;
    const MemoryPerDevice m = evaluate(model, devices(64), setup, layout).memory;
    EXPECT_NEAR(static_cast<double>(m.params + m.grads + m.optimizer), expected[zero], 1.0)
        << "zero " << zero;
  }
}

// A stated reduce dtype is honoured by every precision: bf16-mixed reduces its gradients in bf16
// unless told float32 (Megatron-LM's --bf16 without --grad-reduce-in-bf16: twice the bytes),
// fp32 and bf16 in float32 unless told bf16 (half); nothing else moves.
TEST(CostModel, AStatedReduceDtypeIsHonouredByEveryPrecision) {
  const ModelShape model = one_block(1'000'000'000);
  Layout layout;
  layout.data = 8;
  for (const auto& [precision, own, other] :
       {std::tuple{Precision::kBf16Mixed, DType::kBF16, DType::kF32},
        std::tuple{Precision::kBf16, DType::kF32, DType::kBF16},
        std::tuple{Precision::kFp32, DType::kF32, DType::kBF16}}) {
    TrainingSetup setup;
    setup.global_batch = 8;
    setup.seq = 1024;
    setup.precision = precision;
    const Prediction unstated = evaluate(model, devices(8), setup, layout);
    setup.reduce_dtype = own;
    const Prediction stated = evaluate(model, devices(8), setup, layout);
    EXPECT_EQ(stated.comm_bytes_per_step, unstated.comm_bytes_per_step) << to_string(precision);
    setup.reduce_dtype = other;
    const Prediction changed = evaluate(model, devices(8), setup, layout);
    const double ratio = static_cast<double>(changed.comm_bytes_per_step.at("data")) /
                         static_cast<double>(unstated.comm_bytes_per_step.at("data"));
    EXPECT_NEAR(ratio, other == DType::kF32 ? 2.0 : 0.5, 1e-6) << to_string(precision);
    EXPECT_EQ(changed.memory.total(), unstated.memory.total()) << to_string(precision);
  }
  TrainingSetup bad;
  bad.reduce_dtype = DType::kF64;
  EXPECT_THAT(testing::error_of([&] { bad.validate(); }),
              ::testing::HasSubstr("reduce_dtype is f64; expected fp32 or bf16"));
}

// Korthikanti et al. 2022, table 2's per-layer formulas for GPT-3 175B, s = 2048, b = 1, t = 8:
// 5as/h = 80, so no parallelism 114 sbh, tensor parallel 10 + 24/8 + 80/8 = 23 sbh, with
// sequence parallelism 114/8 = 14.25 sbh, and with selective recompute too 34/8 = 4.25 sbh;
// full recompute 2 sbh.
TEST(CostModel, ActivationsPerLayerReproduceKorthikanti) {
  const ModelShape model = gpt3_175b();
  const double sbh = 2048.0 * 12288.0;
  const auto bytes = [&](std::int64_t t, bool sp, Recompute r) {
    return static_cast<double>(activation_bytes_per_layer(model, 2048, 1, t, sp, r));
  };
  EXPECT_DOUBLE_EQ(bytes(1, false, Recompute::kNone), 114 * sbh);
  EXPECT_DOUBLE_EQ(bytes(8, false, Recompute::kNone), 23 * sbh);
  EXPECT_DOUBLE_EQ(bytes(8, true, Recompute::kNone), 14.25 * sbh);
  EXPECT_DOUBLE_EQ(bytes(8, false, Recompute::kSelective), 13 * sbh);
  EXPECT_DOUBLE_EQ(bytes(8, true, Recompute::kSelective), 4.25 * sbh);
  EXPECT_DOUBLE_EQ(bytes(8, false, Recompute::kFull), 2 * sbh);
  EXPECT_DOUBLE_EQ(bytes(8, true, Recompute::kFull), 2 * sbh / 8);
}

// Narayanan et al. 2021: model FLOPs 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) and, with full
// recomputation, 96 B s l h^2 (1 + s/(6h) + V/(16 l h)). Their worked example (section 5.1):
// 300 billion tokens of GPT-3 175B on 1024 GPUs at 140 TFLOP/s each take about 34 days.
TEST(CostModel, FlopsReproduceNarayanan) {
  const ModelShape model = gpt3_175b();
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  const double base = B * s * l * h * h;
  const double model_expected = 72 * base * (1 + s / (6 * h) + V / (12 * l * h));
  const double hardware_expected = 96 * base * (1 + s / (6 * h) + V / (16 * l * h));
  const auto tokens = static_cast<std::int64_t>(B * s);
  EXPECT_NEAR(model_flops(model, tokens, 2048) / model_expected, 1.0, 1e-12);
  EXPECT_NEAR(hardware_flops(model, tokens, 2048, Recompute::kFull) / hardware_expected, 1.0,
              1e-12);
  const double days =
      hardware_flops(model, 300'000'000'000, 2048, Recompute::kFull) / (1024 * 140e12) / 86400;
  EXPECT_NEAR(days, 34, 34 * 0.05);
}

TEST(CostModel, BubbleIsPMinusOneOverMAndOverVmInterleaved) {
  const ModelShape model = gpt3_175b();
  TrainingSetup setup;
  setup.global_batch = 64;
  setup.seq = 2048;
  Layout layout;
  layout.data = 8;
  layout.model = 8;
  layout.pipeline = 8;
  layout.microbatches = 8;
  EXPECT_DOUBLE_EQ(evaluate(model, devices(512), setup, layout).bubble_fraction, 7.0 / 8.0);
  layout.schedule = ScheduleKind::kInterleaved1F1B;
  layout.virtual_stages = 4;
  EXPECT_DOUBLE_EQ(evaluate(model, devices(512), setup, layout).bubble_fraction, 7.0 / 32.0);
  // Korthikanti: 1F1B's first stage holds p micro-batches of L/p layers, GPipe all m.
  layout.schedule = ScheduleKind::kOneFOneB;
  layout.virtual_stages = 1;
  const Prediction one_f_one_b = evaluate(model, devices(512), setup, layout);
  EXPECT_EQ(one_f_one_b.memory.activations, 96 * one_f_one_b.memory.activations_per_layer);
}

// Clusters and setups past any real run are refused naming the field, before a prediction
// multiplies them.
TEST(CostModel, ClustersAndSetupsPastAnyRunAreRefused) {
  EXPECT_THAT(error_of([] { (void)Cluster::preset("h100-80gb", std::int64_t{1} << 40, 8); }),
              HasSubstr("cluster devices is 1099511627776"));
  TrainingSetup setup;
  setup.global_batch = 8;
  setup.validate();
  setup.seq = TrainingSetup::kMaxSeq + 1;
  EXPECT_THAT(error_of([&] { setup.validate(); }), HasSubstr("seq is 16777217"));
  setup.seq = 64;
  setup.micro_batch = 9;
  EXPECT_THAT(error_of([&] { setup.validate(); }), HasSubstr("micro_batch is 9; expected 1 to 8"));
  setup.micro_batch = 1;
  setup.overlap = std::nan("");
  EXPECT_THAT(error_of([&] { setup.validate(); }), HasSubstr("overlap is nan"));
}

TEST(CostModel, LayoutsThatCannotRunAreNamed) {
  const ModelShape model = gpt3_175b();
  TrainingSetup setup;
  setup.global_batch = 64;
  setup.seq = 2048;
  Layout layout;
  layout.data = 4;
  EXPECT_THAT(error_of([&] { (void)evaluate(model, devices(8), setup, layout); }),
              HasSubstr("= 4, not the 8 devices"));
  layout.data = 1;
  layout.model = 8;
  layout.microbatches = 64;
  EXPECT_TRUE(evaluate(model, devices(8), setup, layout).fits == false);
  layout.model = 1;
  layout.pipeline = 8;
  layout.schedule = ScheduleKind::kInterleaved1F1B;
  layout.virtual_stages = 5;
  EXPECT_THAT(error_of([&] { (void)evaluate(model, devices(8), setup, layout); }),
              HasSubstr("does not divide the 96 layers"));
  layout.virtual_stages = 1;
  layout.schedule = ScheduleKind::kOneFOneB;
  layout.fsdp = 8;
  layout.pipeline = 1;
  EXPECT_THAT(error_of([&] { (void)evaluate(model, devices(8), setup, layout); }),
              HasSubstr("micro-batches"));
  layout.microbatches = 8;
  EXPECT_THAT(error_of([&] { (void)evaluate(model, devices(8), setup, layout); }),
              HasSubstr("an fsdp axis shards: zero 1, 2 or 3"));
}

// The search: every layout it returns is valid, the best fits and comes first; on 16,384
// devices for a 405B model it finds layouts that fit with recomputation.
TEST(Search, RanksFittingLayoutsByStepTime) {
  ModelShape model = gpt3_175b();
  TrainingSetup setup;
  setup.global_batch = 1536;
  setup.seq = 2048;
  SearchOptions options;
  options.top = 10;
  options.recompute = Recompute::kSelective;
  options.sequence_parallel = true;
  const SearchResult result = search_layouts(model, devices(1024), setup, options);
  ASSERT_FALSE(result.ranked.empty());
  EXPECT_GT(result.evaluated, 100U);
  EXPECT_TRUE(result.ranked.front().prediction.fits);
  EXPECT_EQ(result.ranked.front().why_not_best, "");
  for (std::size_t i = 1; i < result.ranked.size(); ++i) {
    const Prediction& p = result.ranked[i].prediction;
    EXPECT_FALSE(layout_problem(model, devices(1024), setup, p.layout).has_value());
    if (p.fits) {
      EXPECT_GE(p.step_time_s, result.ranked.front().prediction.step_time_s * (1 - 1e-3));
    }
    EXPECT_FALSE(result.ranked[i].why_not_best.empty());
  }
}

}  // namespace
}  // namespace shardwise::plan

// DistributedModel on its own (not through the command): a rank's store holds its blocks of the
// one-rank model's values; a tensor-parallel and a pipelined model give the one-rank loss and
// gradients (each rank's blocks of them, the tied embedding's copies summed); `ready` hears of
// every parameter once and never of a tied copy before its sum; a chunk holds exactly what its
// activation table sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "error_of.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/strategy/activation_table.hpp"
#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/loss_evaluation.hpp"

namespace shardwise::train {
namespace {

constexpr std::size_t kSequences = 4;
constexpr std::size_t kSeq = 8;

std::shared_ptr<const ModelDefinition> tied_gpt() {
  return std::make_shared<const models::GptDefinition>(models::GptConfig{2, 4, 32, 16, 64});
}

std::shared_ptr<const ModelDefinition> qwen3() {
  models::LlamaConfig c = models::llama_preset("qwen3-tiny", "model");
  c.n_layer = 2;
  c.hidden_size = 32;
  c.head_dim = 12;
  c.intermediate_size = 48;
  c.context_length = 16;
  c.vocab_size = 64;
  return std::make_shared<const models::LlamaDefinition>(c);
}

struct Batch {
  std::vector<std::int32_t> tokens, targets;
};

Batch batch(std::size_t vocab) {
  Batch b;
  for (std::size_t i = 0; i < kSequences * kSeq; ++i) {
    b.tokens.push_back(static_cast<std::int32_t>((i * 5 + 1) % vocab));
    b.targets.push_back(static_cast<std::int32_t>((i * 3 + 2) % vocab));
  }
  return b;
}

// The element of the whole parameter that element `i` of a rank's block is.
std::size_t whole_index(const ParameterSpec& spec, std::size_t i) {
  if (spec.block.empty()) return i;
  const Shape& whole = spec.global_shape;
  std::size_t rest = i, index = 0, stride = 1;
  std::vector<std::size_t> coordinate(spec.shape.size());
  for (std::size_t d = spec.shape.size(); d-- > 0;) {
    coordinate[d] = rest % static_cast<std::size_t>(spec.shape[d]);
    rest /= static_cast<std::size_t>(spec.shape[d]);
  }
  for (std::size_t d = whole.size(); d-- > 0;) {
    index += (coordinate[d] + static_cast<std::size_t>(spec.block[d].start)) * stride;
    stride *= static_cast<std::size_t>(whole[d]);
  }
  return index;
}

struct OneRank {
  float loss = 0;
  std::vector<std::vector<float>> values, grads;  // per parameter, whole
};

OneRank one_rank(const std::shared_ptr<const ModelDefinition>& definition) {
  DistributedModel model(definition, 11);
  const Batch b = batch(definition->vocab_size());
  ParameterStore& store = model.parameters();
  store.zero_grads();
  OneRank out;
  out.loss = model.forward_backward(b.tokens, b.targets, kSequences, kSeq, true);
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    out.values.emplace_back(store.value(p), store.value(p) + store.count(p));
    out.grads.emplace_back(store.grad(p), store.grad(p) + store.count(p));
  }
  return out;
}

// On every rank of `mesh`: the loss, and every held parameter's values and gradients against
// the one-rank model's elements (tied copies after their sum).
void expect_one_ranks(const std::shared_ptr<const ModelDefinition>& definition, const char* mesh,
                      ModelLayout layout) {
  SCOPED_TRACE(mesh);
  const OneRank whole = one_rank(definition);
  const Mesh m = Mesh::parse(mesh);
  std::mutex mutex;
  run_local(static_cast<int>(m.size()), [&](Communicator& comm) {
    ParallelContext context(comm, m);
    DistributedModel model(definition, 11, context, layout);
    const Batch b = batch(definition->vocab_size());
    ParameterStore& store = model.parameters();
    store.zero_grads();
    std::vector<std::pair<std::size_t, std::size_t>> told;
    const float loss = model.forward_backward(
        b.tokens, b.targets, kSequences, kSeq, true,
        [&](std::size_t first, std::size_t end) { told.emplace_back(first, end); });
    const std::lock_guard lock(mutex);
    EXPECT_NEAR(loss, whole.loss, 2e-6 * whole.loss) << "rank " << comm.rank();
    const std::vector<ParameterSpec> names = definition->parameters();
    std::vector<int> heard(store.values().size(), 0);
    for (const auto& [first, end] : told) {
      for (std::size_t i = first; i < end; ++i) ++heard[i];
    }
    for (std::size_t p = 0; p < store.specs().size(); ++p) {
      const ParameterSpec& spec = store.specs()[p];
      const auto at = static_cast<std::size_t>(
          std::find_if(names.begin(), names.end(),
                       [&](const ParameterSpec& n) { return n.name == spec.name; }) -
          names.begin());
      ASSERT_LT(at, names.size()) << spec.name;
      double largest = 0;
      for (float g : whole.grads[at]) largest = std::max(largest, std::abs(double{g}));
      for (std::size_t i = 0; i < store.count(p); ++i) {
        const std::size_t w = whole_index(spec, i);
        ASSERT_EQ(store.value(p)[i], whole.values[at][w]) << spec.name << " " << i;
        ASSERT_NEAR(store.grad(p)[i], whole.grads[at][w], 1e-4 * largest + 1e-7)
            << spec.name << " " << i << " rank " << comm.rank();
        // Every parameter heard of once as final; on a pipeline the tied embedding's whole unit
        // never (its gradient is final only once summed over its stages after the schedule, a
        // unit is announced whole under ZeRO-3, and the trainer reduces what it was not told).
        const bool tied = layout.pipeline && spec.unit == "embeddings";
        EXPECT_EQ(heard[store.offset(p) + i], tied ? 0 : 1) << spec.name;
      }
    }
  });
}

TEST(DistributedModel, TensorParallelRanksHoldBlocksOfTheOneRankModelAndItsGradients) {
  for (const auto& definition : {tied_gpt(), qwen3()}) {
    expect_one_ranks(definition, "model=2", {});
    ModelLayout sequence_parallel;
    sequence_parallel.sequence_parallel = true;
    expect_one_ranks(definition, "model=4", sequence_parallel);
  }
}

TEST(DistributedModel, APipelineGivesTheOneRankLossAndSumsTheTiedEmbedding) {
  ModelLayout pipelined;
  pipelined.pipeline = PipelineLayout{ScheduleKind::kOneFOneB, 2, 1, {}};
  expect_one_ranks(tied_gpt(), "pipeline=2", pipelined);
  ModelLayout interleaved;
  interleaved.pipeline = PipelineLayout{ScheduleKind::kInterleaved1F1B, 2, 2, {1, 1, 1, 1}};
  models::GptConfig four{4, 4, 32, 16, 64};
  expect_one_ranks(std::make_shared<const models::GptDefinition>(four), "pipeline=2", interleaved);
}

// Each chunk holds exactly what the activation table sizes for its layers, slots, head and
// precision (bf16 keeps a layer's arrays in bf16 and computes them in one float32 layer): the
// table the planner sums is the one the chunk allocates from.
TEST(DistributedModel, AChunkHoldsWhatItsActivationTableSizes) {
  for (const auto& definition : {tied_gpt(), qwen3()}) {
    for (const auto& [precision, stream] :
         {std::pair{Precision::kFp32, DType::kF32}, std::pair{Precision::kBf16, DType::kF32},
          std::pair{Precision::kBf16, DType::kBF16}}) {
      for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
        run_local(2, [&](Communicator& comm) {
          ParallelContext context(comm, Mesh::parse("model=2"));
          ModelLayout layout;
          layout.sequence_parallel = true;
          layout.recompute = recompute;
          layout.precision = precision;
          layout.residual_dtype = stream;
          DistributedModel model(definition, 3, context, layout);
          const Batch b = batch(definition->vocab_size());
          (void)model.forward_backward(b.tokens, b.targets, kSequences, kSeq, true);
          ChunkGeometry geometry;
          geometry.batch = kSequences;
          geometry.seq = kSeq;
          geometry.model_degree = 2;
          geometry.sequence_parallel = true;
          geometry.recompute = recompute;
          geometry.layers = definition->layers();
          geometry.has_head = true;
          geometry.rounded_products = precision == Precision::kBf16;
          geometry.narrow_stream = stream == DType::kBF16;
          const ActivationTable table(definition->manifest().transformer.value(), geometry);
          const ElementTypes types = precision == Precision::kBf16
                                         ? ElementTypes::bf16_compute(stream)
                                         : ElementTypes::fp32();
          EXPECT_EQ(model.activation_bytes(), table.chunk_bytes(1, types));
          EXPECT_GT(table.elements(Activation::kNormLocal), 0U);
          EXPECT_EQ(table.elements(Activation::kStreamInput) > 0, stream == DType::kBF16);
          if (precision == Precision::kBf16 && recompute == Recompute::kNone) {
            // Each layer keeps less; one float32 layer is added, whatever the layers.
            EXPECT_LT(table.layer_bytes(types), table.layer_bytes(ElementTypes::fp32()));
            EXPECT_GT(table.working_layer_bytes(types), 0U);
          }
          if (stream == DType::kBF16) {
            // The stream's arrays too.
            EXPECT_LT(table.layer_bytes(types), table.layer_bytes(ElementTypes::bf16_compute()));
          }
        });
      }
    }
  }
}

// bf16 layers keep their arrays in bf16 and compute in float32: what a layer keeps must be
// exactly what its forward computed with, or its backward differentiates another function.
// Full recomputation computes the backward from a float32 forward done again, never kept: both
// give the same loss and gradients, bit for bit, on every family, with sequence parallelism. An
// array a part leaves unrounded (attention's output, the MLP's activation, the queries after
// their rotation) is rounded only when kept, and fails this.
TEST(DistributedModel, Bf16LayersKeepExactlyWhatTheirForwardComputed) {
  models::LlamaConfig qwen2 = models::llama_preset("qwen2-tiny", "model");
  qwen2.n_layer = 2;
  qwen2.vocab_size = 64;
  qwen2.context_length = 16;
  for (const auto& definition : {tied_gpt(), qwen3(),
                                 std::shared_ptr<const ModelDefinition>(
                                     std::make_shared<const models::LlamaDefinition>(qwen2))}) {
    SCOPED_TRACE(definition->describe());
    for (const DType stream : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE("residual stream " + float_dtype_name(stream));
      run_local(2, [&](Communicator& comm) {
        ParallelContext context(comm, Mesh::parse("model=2"));
        std::vector<float> grads[2];
        float losses[2] = {};
        for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
          ModelLayout layout;
          layout.sequence_parallel = true;
          layout.recompute = recompute;
          layout.precision = Precision::kBf16;
          layout.residual_dtype = stream;
          DistributedModel model(definition, 3, context, layout);
          const Batch b = batch(definition->vocab_size());
          model.parameters().zero_grads();
          const auto at = static_cast<std::size_t>(recompute == Recompute::kFull);
          losses[at] = model.forward_backward(b.tokens, b.targets, kSequences, kSeq, true);
          grads[at].assign(model.parameters().grads().begin(), model.parameters().grads().end());
        }
        EXPECT_EQ(losses[0], losses[1]);
        ASSERT_EQ(grads[0].size(), grads[1].size());
        std::size_t differing = 0;
        for (std::size_t i = 0; i < grads[0].size(); ++i) differing += grads[0][i] != grads[1][i];
        EXPECT_EQ(differing, 0U) << "of " << grads[0].size() << " gradients";
      });
    }
  }
}

// A residual stream in bf16 is rounded at each add: a chunk that ends before the head hands on
// its last layer's output, which must then be bf16 values (its low 16 bits zero), and is not
// under the float32 stream; and over the chunk's two layers, rounding the stream changes what
// the layers compute (a chunk that rounded only what it keeps, or only the output, would hand on
// the float32 stream's values, or its roundings).
TEST(DistributedModel, ABf16ResidualStreamIsRoundedAtEachAdd) {
  for (const auto& definition : {tied_gpt(), qwen3()}) {
    SCOPED_TRACE(definition->describe());
    std::vector<float> outputs[2];
    for (const DType stream : {DType::kF32, DType::kBF16}) {
      ParameterStore store(definition->parameters());
      ChunkOptions options;
      options.range = {0, 1};
      options.precision = Precision::kBf16;
      options.residual_dtype = stream;
      const std::unique_ptr<ModelChunk> chunk = definition->build_chunk(store, options);
      store.initialize_on_use(3);
      const Batch b = batch(definition->vocab_size());
      std::vector<float>& out = outputs[stream == DType::kBF16 ? 1 : 0];
      out.assign(chunk->boundary_elements(kSequences, kSeq), 0.0F);
      (void)chunk->forward(0, b.tokens, b.targets, kSequences, kSeq, {}, out, false);
      std::size_t unrounded = 0;
      for (const float v : out) unrounded += (std::bit_cast<std::uint32_t>(v) & 0xFFFFU) != 0;
      if (stream == DType::kBF16) {
        EXPECT_EQ(unrounded, 0U) << "of " << out.size();
      } else {
        EXPECT_GT(unrounded, out.size() / 2) << "of " << out.size();
      }
    }
    // Rounding the float32 stream's output is not the bf16 stream's: the layer's input (the
    // embeddings) and its sum after attention were rounded too.
    std::size_t differing = 0;
    for (std::size_t i = 0; i < outputs[0].size(); ++i) {
      const float rounded = to_float(to_bfloat16(outputs[0][i]));
      differing += rounded != outputs[1][i];
    }
    EXPECT_GT(differing, 0U);
  }
}

// The backward of a bf16 stream is the float32 stream's through the roundings (each rounding's
// gradient passed through, as autocast's casts): its gradients are the float32 stream's within
// bf16's rounding, and not equal to them. A backward that read another layer's input, or a
// stale widening, would be far off.
TEST(DistributedModel, ABf16ResidualStreamsGradientsFollowTheFloat32Streams) {
  for (const auto& definition : {tied_gpt(), qwen3()}) {
    SCOPED_TRACE(definition->describe());
    std::vector<float> grads[2];
    float losses[2] = {};
    for (const DType stream : {DType::kF32, DType::kBF16}) {
      DistributedModel model(definition, 3, Precision::kBf16, stream);
      const Batch b = batch(definition->vocab_size());
      model.parameters().zero_grads();
      const auto at = static_cast<std::size_t>(stream == DType::kBF16);
      losses[at] = model.forward_backward(b.tokens, b.targets, kSequences, kSeq, true);
      grads[at].assign(model.parameters().grads().begin(), model.parameters().grads().end());
    }
    EXPECT_NEAR(losses[1], losses[0], 1e-2 * losses[0]);
    ASSERT_EQ(grads[0].size(), grads[1].size());
    double difference = 0, norm = 0;
    for (std::size_t i = 0; i < grads[0].size(); ++i) {
      difference += std::pow(static_cast<double>(grads[1][i]) - grads[0][i], 2);
      norm += std::pow(static_cast<double>(grads[0][i]), 2);
    }
    ASSERT_GT(norm, 0);
    EXPECT_LT(std::sqrt(difference / norm), 2e-2);
    EXPECT_GT(difference, 0);
  }
}

// A bf16 stream is part of bf16 precision: under float32 the chunk refuses it, naming the setting.
TEST(DistributedModel, ABf16ResidualStreamNeedsBf16Precision) {
  ParameterStore store(tied_gpt()->parameters());
  ChunkOptions options;
  options.residual_dtype = DType::kBF16;
  EXPECT_THAT(testing::error_of([&] { (void)tied_gpt()->build_chunk(store, options); }),
              ::testing::HasSubstr("residual_dtype is bf16 under fp32 precision"));
  options.precision = Precision::kBf16;
  options.residual_dtype = DType::kF16;
  EXPECT_THAT(testing::error_of([&] { (void)tied_gpt()->build_chunk(store, options); }),
              ::testing::HasSubstr("residual_dtype is f16"));
}

// The held-out losses of `ckpt loss`: windows one after the other, each the model's mean
// loss there; examples, each's loss over its counted tokens alone, weighted by how many.
TEST(LossEvaluation, WindowsAndExamplesAreTheMeansTheirTokensGive) {
  const auto definition = tied_gpt();
  DistributedModel model(definition, 3);
  const Batch b = batch(definition->vocab_size());
  // 2 whole windows of kSeq (and a remainder left out).
  const std::span<const std::int32_t> tokens(b.tokens.data(), 2 * kSeq + 3);
  const WindowLoss windows = window_loss(model, tokens, kSeq);
  EXPECT_EQ(windows.windows, 2U);
  const double first =
      model.forward_backward(tokens.first(kSeq), tokens.subspan(1, kSeq), 1, kSeq, false);
  const double second = model.forward_backward(tokens.subspan(kSeq, kSeq),
                                               tokens.subspan(kSeq + 1, kSeq), 1, kSeq, false);
  EXPECT_DOUBLE_EQ(windows.loss, (first + second) / 2);
  EXPECT_THAT(testing::error_of([&] { (void)window_loss(model, tokens.first(kSeq), kSeq); }),
              ::testing::HasSubstr("a window of 8 needs 9"));

  // Two examples: the first counts its last 2 targets, the second 1 (and is cut to kSeq + 1).
  ExampleSet set("examples");
  const std::vector<std::int32_t> a(tokens.begin(), tokens.begin() + 5);
  const std::vector<std::uint8_t> a_counted{0, 0, 0, 1, 1};
  const std::vector<std::int32_t> c(tokens.begin() + 5, tokens.begin() + 5 + kSeq + 4);
  std::vector<std::uint8_t> c_counted(c.size(), 0);
  c_counted[2] = 1;
  c_counted[kSeq + 2] = 1;  // past the cut: not counted
  set.add(a, a_counted);
  set.add(c, c_counted);
  const ExampleLoss loss = example_loss(model, set, kSeq);
  EXPECT_EQ(loss.examples, 2U);
  EXPECT_EQ(loss.counted, 3U);
  const auto one_target = [&](std::span<const std::int32_t> ids, std::size_t positions,
                              std::size_t t) {
    std::vector<std::int32_t> targets(positions, kernels::kIgnoredTarget);
    targets[t] = ids[t + 1];
    return static_cast<double>(
               model.forward_backward(ids.first(positions), targets, 1, positions, false)) *
           static_cast<double>(positions);
  };
  const double expected = (one_target(a, 4, 2) + one_target(a, 4, 3) + one_target(c, kSeq, 1)) / 3;
  EXPECT_NEAR(loss.loss, expected, 1e-5 * expected);

  ExampleSet none("none");
  none.add(a, std::vector<std::uint8_t>(a.size(), 0));
  EXPECT_THAT(testing::error_of([&] { (void)example_loss(model, none, kSeq); }),
              ::testing::HasSubstr("no counted token"));
}

}  // namespace
}  // namespace shardwise::train

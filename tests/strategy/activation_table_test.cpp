// The activation table in bytes: each array of its element type (ElementTypes), so that the
// planner's memory of a precision is the arrays' own sizes, not a factor on their sum.
#include "shardwise/strategy/activation_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TransformerShape qwen3_like() {
  TransformerShape s;
  s.layers = 2;
  s.hidden = 64;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.mlp_width = 128;
  s.vocab = 96;
  s.context = 32;
  s.positions = PositionKind::kRotary;
  s.norm = NormKind::kRmsNorm;
  s.mlp = MlpKind::kGatedSilu;
  s.qk_norm = true;
  return s;
}

ChunkGeometry geometry(Recompute recompute) {
  ChunkGeometry g;
  g.batch = 2;
  g.seq = 16;
  g.model_degree = 2;
  g.sequence_parallel = true;
  g.recompute = recompute;
  g.layers = 2;
  g.has_head = true;
  return g;
}

TEST(ActivationTable, StatisticsAreTheNormsTheLossAndTheHeadsBlocks) {
  for (const Activation a :
       {Activation::kNorm1Statistics, Activation::kQkNormStatistics, Activation::kLogSumExp,
        Activation::kNorm2Statistics, Activation::kHeadStatistics, Activation::kLosses,
        Activation::kLogits, Activation::kProbabilities}) {
    EXPECT_TRUE(is_statistic(a)) << name_of(a);
    EXPECT_EQ(element_type_of(a, ElementTypes::bf16_mixed()), DType::kF32) << name_of(a);
  }
  for (const Activation a : {Activation::kNorm1, Activation::kProjections, Activation::kMlp,
                             Activation::kLayerOutput, Activation::kResidualGrad}) {
    EXPECT_FALSE(is_statistic(a)) << name_of(a);
    EXPECT_EQ(element_type_of(a, ElementTypes::bf16_mixed()), DType::kBF16) << name_of(a);
  }
  // A pass's share of a parameter's gradient is a gradient.
  ElementTypes types;
  types.gradients = DType::kF16;
  EXPECT_EQ(element_type_of(Activation::kKvHeadGrads, types), DType::kF16);
  EXPECT_EQ(element_type_of(Activation::kQkNormGrads, types), DType::kF16);
  EXPECT_EQ(element_type_of(Activation::kNormParameterGrads, types), DType::kF16);
}

TEST(ActivationTable, BytesSumEachArrayInItsOwnType) {
  for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    const ActivationTable table(qwen3_like(), geometry(recompute));
    EXPECT_EQ(table.chunk_bytes(3, ElementTypes::fp32()), 4 * table.chunk_elements(3));
    EXPECT_EQ(table.layer_bytes(ElementTypes::fp32()), 4 * table.layer_elements());

    const ElementTypes mixed = ElementTypes::bf16_mixed();
    std::size_t statistics = 0, others = 0;
    for (std::size_t i = 0; i < kActivationCount; ++i) {
      const auto a = static_cast<Activation>(i);
      if (lifetime_of(a) != Lifetime::kLayer && lifetime_of(a) != Lifetime::kLayerOutput) continue;
      (is_statistic(a) ? statistics : others) += table.elements(a);
    }
    ASSERT_GT(statistics, 0U);
    EXPECT_EQ(table.layer_bytes(mixed), 4 * statistics + 2 * others);
    EXPECT_LT(table.chunk_bytes(3, mixed), table.chunk_bytes(3, ElementTypes::fp32()));
    EXPECT_GT(2 * table.chunk_bytes(3, mixed), table.chunk_bytes(3, ElementTypes::fp32()));

    // Everything in one 2-byte type: exactly half of float32's.
    ElementTypes halves = mixed;
    halves.statistics = DType::kBF16;
    EXPECT_EQ(2 * table.chunk_bytes(3, halves), table.chunk_bytes(3, ElementTypes::fp32()));
  }
}

// shardwise's bf16 keeps what a layer keeps for backward in bf16 and the residual stream and
// statistics in float32, and computes each layer in one float32 layer besides: the working
// layer, which full recomputation's layer is in every precision.
TEST(ActivationTable, Bf16KeepsTheLayersArraysAndComputesInOneFloat32Layer) {
  const ElementTypes bf16 = ElementTypes::bf16_compute();
  for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    const ActivationTable table(qwen3_like(), geometry(recompute));
    std::size_t kept = 0, others = 0, layer = 0;
    for (std::size_t i = 0; i < kActivationCount; ++i) {
      const auto a = static_cast<Activation>(i);
      if (lifetime_of(a) != Lifetime::kLayer) continue;
      layer += table.elements(a);
      (is_kept(a) ? kept : others) += table.elements(a);
    }
    ASSERT_GT(kept, 0U);
    ASSERT_GT(others, 0U);
    EXPECT_EQ(table.bytes(Lifetime::kLayer, bf16), 2 * kept + 4 * others);
    EXPECT_EQ(table.bytes(Activation::kLayerOutput, bf16),
              4 * table.elements(Activation::kLayerOutput));
    const bool full = recompute == Recompute::kFull;
    EXPECT_EQ(table.working_layer_bytes(bf16), full ? 4 * layer : 4 * kept);
    EXPECT_EQ(table.working_layer_bytes(ElementTypes::fp32()), full ? 4 * layer : 0);
    // Everything else as float32 keeps it.
    const std::size_t slots = 3;
    const std::size_t fp32 = table.chunk_bytes(slots, ElementTypes::fp32());
    const std::size_t layers = 2;
    const std::size_t saved = full ? 0 : slots * layers * 2 * kept;
    EXPECT_EQ(table.chunk_bytes(slots, bf16) + saved, fp32 + (full ? 0 : 4 * kept));
  }
  for (const Activation a : {Activation::kNorm1, Activation::kProjections, Activation::kQkNormInput,
                             Activation::kAttention, Activation::kNorm2, Activation::kMlp}) {
    EXPECT_TRUE(is_kept(a)) << name_of(a);
    EXPECT_EQ(element_type_of(a, bf16), DType::kBF16) << name_of(a);
    EXPECT_EQ(working_type_of(a, bf16), DType::kF32) << name_of(a);
  }
  for (const Activation a :
       {Activation::kResidual2, Activation::kLayerOutput, Activation::kInput, Activation::kHeadNorm,
        Activation::kResidualGrad, Activation::kNorm1Statistics}) {
    EXPECT_FALSE(is_kept(a)) << name_of(a);
    EXPECT_EQ(element_type_of(a, bf16), DType::kF32) << name_of(a);
  }
}

// The products' rounding buffers are the table's too: none where the products do not round;
// in bf16 without recomputation only the head's blocks round an input afresh (the layers' inputs
// are kept copies), under full recomputation every layer's input does; each is bf16.
TEST(ActivationTable, RoundingBuffersAreHeldOnlyWhereProductsRound) {
  for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    ChunkGeometry g = geometry(recompute);
    const ActivationTable plain(qwen3_like(), g);
    EXPECT_EQ(plain.elements(Activation::kRoundedInput), 0U);
    EXPECT_EQ(plain.elements(Activation::kRoundedOutputGrad), 0U);
    g.rounded_products = true;
    const ActivationTable rounding(qwen3_like(), g);
    const std::size_t whole = g.batch * g.seq, hidden = qwen3_like().hidden;
    const std::size_t head = rounding.head_block() * hidden;
    EXPECT_EQ(rounding.elements(Activation::kRoundedInput),
              recompute == Recompute::kFull ? std::max(head, whole * 64) : head);
    EXPECT_GE(rounding.elements(Activation::kRoundedOutputGrad), whole * hidden);
    EXPECT_EQ(element_type_of(Activation::kRoundedInput, ElementTypes::bf16_compute()),
              DType::kBF16);
  }
}

TEST(ElementTypes, MixedPrecisionKeepsMastersAndMomentsInFloat32) {
  constexpr ElementTypes mixed = ElementTypes::bf16_mixed();
  EXPECT_EQ(mixed.master, DType::kF32);
  EXPECT_EQ(mixed.optimizer, DType::kF32);
  EXPECT_EQ(mixed.compute, DType::kBF16);
  EXPECT_EQ(mixed.activations, DType::kBF16);
  EXPECT_TRUE(mixed.separate_master());
  EXPECT_FALSE(ElementTypes::fp32().separate_master());
  EXPECT_NE(mixed, ElementTypes::fp32());
}

// A residual stream in bf16 (Megatron-LM's --bf16 without --fp32-residual-connection) keeps the
// stream's arrays (the sum after attention, each layer's output, the chunk's input) in bf16,
// computes a layer's in the working layer (its output there under every recomputation), and
// widens a layer's input into one more row-block of scratch.
TEST(ActivationTable, ABf16StreamIsKeptInBf16AndComputedInTheWorkingLayer) {
  const ElementTypes wide = ElementTypes::bf16_compute();
  const ElementTypes narrow = ElementTypes::bf16_compute(DType::kBF16);
  EXPECT_FALSE(wide.stream_narrower());
  EXPECT_TRUE(narrow.stream_narrower());
  EXPECT_FALSE(ElementTypes::bf16_mixed().stream_narrower());
  for (const Activation a :
       {Activation::kResidual2, Activation::kLayerOutput, Activation::kInput}) {
    EXPECT_TRUE(is_stream(a)) << name_of(a);
    EXPECT_EQ(element_type_of(a, narrow), DType::kBF16) << name_of(a);
    EXPECT_EQ(working_type_of(a, narrow), DType::kF32) << name_of(a);
    EXPECT_TRUE(kept_rounded(a, narrow)) << name_of(a);
    EXPECT_FALSE(kept_rounded(a, wide)) << name_of(a);
  }
  for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    const bool full = recompute == Recompute::kFull;
    ChunkGeometry g = geometry(recompute);
    g.rounded_products = true;
    const ActivationTable wide_table(qwen3_like(), g);
    g.narrow_stream = true;
    const ActivationTable table(qwen3_like(), g);
    const std::size_t rows = table.elements(Activation::kResidual2);  // R x hidden
    ASSERT_GT(rows, 0U);
    EXPECT_EQ(rows, table.local_rows() * qwen3_like().hidden);
    EXPECT_EQ(table.elements(Activation::kStreamInput), rows);
    EXPECT_EQ(wide_table.elements(Activation::kStreamInput), 0U);
    EXPECT_EQ(table.elements(Activation::kLayerOutput), rows);
    EXPECT_EQ(table.elements(Activation::kInput), rows);
    // The working layer adds the output (and, kept, the sum after attention) in float32.
    EXPECT_EQ(table.working_layer_bytes(narrow),
              wide_table.working_layer_bytes(wide) + 4 * rows * (full ? 1 : 2));
    // Each layer keeps its stream's arrays in half the bytes (full recomputation: its output).
    const std::size_t layers = 2, slots = 3;
    const std::size_t per_layer = full ? 2 * rows : 2 * 2 * rows;
    EXPECT_EQ(table.chunk_bytes(slots, narrow) + slots * (layers * per_layer + 2 * rows),
              wide_table.chunk_bytes(slots, wide) + 4 * rows * (full ? 1 : 2) + 4 * rows);
  }
}

// A Mixture of Experts' layer keeps the k routed copies of each row, their gate and up
// products, activations and outputs (kMlp), and the router's probabilities as statistics
// (kRouter, float32 in every precision: backward chooses the experts again from them); its
// products' rounding buffers hold the routed rows and the router's logits.
TEST(ActivationTable, AMixtureOfExpertsKeepsTheRoutedRowsAndTheProbabilities) {
  TransformerShape moe = qwen3_like();
  moe.experts = 8;
  moe.experts_per_token = 2;
  moe.expert_width = 40;
  ChunkGeometry g = geometry(Recompute::kNone);
  g.model_degree = 1;
  g.sequence_parallel = false;
  g.rounded_products = true;
  const ActivationTable table(moe, g);
  const std::size_t BT = 2 * 16, routed = BT * 2, C = 64, I = 40;
  EXPECT_EQ(table.elements(Activation::kMlp), routed * (2 * C + 3 * I));
  EXPECT_EQ(table.elements(Activation::kRouter), BT * 8);
  EXPECT_EQ(table.elements(Activation::kMlpGrad), 0U);
  EXPECT_TRUE(is_statistic(Activation::kRouter));
  EXPECT_EQ(element_type_of(Activation::kRouter, ElementTypes::bf16_compute()), DType::kF32);
  EXPECT_EQ(element_type_of(Activation::kMlp, ElementTypes::bf16_compute()), DType::kBF16);
  // The largest product output: the routed gate and up (routed x 2 I) or the logits' block.
  EXPECT_GE(table.elements(Activation::kRoundedOutputGrad), routed * 2 * I);
  // A dense shape keeps no router.
  EXPECT_EQ(ActivationTable(qwen3_like(), g).elements(Activation::kRouter), 0U);
  g.recompute = Recompute::kFull;
  EXPECT_GE(ActivationTable(moe, g).elements(Activation::kRoundedInput), routed * C);
}

}  // namespace
}  // namespace shardwise

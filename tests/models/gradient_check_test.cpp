// Whole-model gradient checks: every parameter's gradient from backward against central
// differences of the loss, for the Llama (whose backward writes gradients over activations in
// place) and the GPT, untied and tied, with some targets ignored. A bug every layout shares
// passes the layout tests; it fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "gpt_test_model.hpp"
#include "shardwise/core/half.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/train/distributed_model.hpp"

namespace shardwise::train {
namespace {

constexpr std::size_t kSequences = 2;
constexpr std::size_t kSeq = 6;

// For each parameter, up to 5 of its elements spread over it: the analytic gradient equals the
// central difference within 2% of the parameter's largest gradient (float32 forward passes).
// Where `kinks` is set, the loss has steps (an auxiliary loss counting the routers' choices, which
// a step may change): an element whose central differences at the step and at half of it
// disagree is a kink and skipped, at most a tenth of them.
void expect_whole_model_gradients(DistributedModel& model, std::size_t vocab, bool kinks = false) {
  std::vector<std::int32_t> tokens(kSequences * kSeq), targets(kSequences * kSeq);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 7 + 3) % vocab);
    targets[i] =
        i % 5 == 4 ? kernels::kIgnoredTarget : static_cast<std::int32_t>((i * 11 + 1) % vocab);
  }
  ParameterStore& store = model.parameters();
  store.zero_grads();
  (void)model.forward_backward(tokens, targets, kSequences, kSeq, true);
  const std::vector<float> analytic(store.grads().begin(), store.grads().end());
  const auto loss = [&] {
    return static_cast<double>(model.forward_backward(tokens, targets, kSequences, kSeq, false));
  };
  std::size_t checked = 0, skipped = 0;
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    const std::size_t count = store.count(p);
    const float* grad = analytic.data() + store.offset(p);
    double largest = 0;
    for (std::size_t i = 0; i < count; ++i) largest = std::max(largest, std::abs(double{grad[i]}));
    float* value = store.value(p);
    const std::size_t stride = std::max<std::size_t>(1, count / 5);
    for (std::size_t i = 0; i < count; i += stride) {
      const float saved = value[i];
      const auto central = [&](float step) {
        value[i] = saved + step;
        const double up = loss();
        value[i] = saved - step;
        const double down = loss();
        value[i] = saved;
        return (up - down) / (2.0 * static_cast<double>(step));
      };
      const float step = 1e-2F * std::max(1.0F, std::abs(saved));
      const double numeric = central(step);
      const double tolerance = 2e-2 * largest + 2e-4;
      if (kinks && std::abs(central(step / 2) - numeric) > tolerance) {
        ++skipped;
        continue;
      }
      EXPECT_NEAR(grad[i], numeric, tolerance) << store.specs()[p].name << " element " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 40U);
  EXPECT_LE(skipped * 10, checked + skipped) << skipped << " kinks";
}

models::LlamaConfig small_llama(bool tied) {
  models::LlamaConfig config;
  config.n_layer = 2;
  config.hidden_size = 16;
  config.n_head = 4;
  config.n_kv_head = 2;
  config.head_dim = 4;
  config.intermediate_size = 24;
  config.context_length = 8;
  config.vocab_size = 40;
  config.tie_word_embeddings = tied;
  return config;
}

TEST(WholeModelGradients, LlamaUntiedAndTied) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    auto definition = std::make_shared<const models::LlamaDefinition>(small_llama(tied));
    DistributedModel model(definition, 7);
    expect_whole_model_gradients(model, 40);
  }
}

// Qwen2's biases on q, k and v; Qwen3's norms of each head's queries and keys (with a head_dim
// that is not hidden / heads, and attention_bias's biases on q, k, v and o).
TEST(WholeModelGradients, Qwen2AndQwen3) {
  models::LlamaConfig qwen2 = small_llama(true);
  qwen2.variant = models::LlamaVariant::kQwen2;
  models::LlamaConfig qwen3 = small_llama(false);
  qwen3.variant = models::LlamaVariant::kQwen3;
  qwen3.head_dim = 6;
  qwen3.attention_bias = true;
  for (const models::LlamaConfig& config : {qwen2, qwen3}) {
    SCOPED_TRACE(models::to_string(config.variant));
    auto definition = std::make_shared<const models::LlamaDefinition>(config);
    DistributedModel model(definition, 7);
    // Biases start at zero: give every parameter a value of its own, so that a bias or a norm
    // the backward forgets cannot hide behind a zero.
    ParameterStore& store = model.parameters();
    for (std::size_t i = 0; i < store.values().size(); ++i) {
      store.values()[i] += 0.05F * static_cast<float>(static_cast<int>(i * 37 % 19) - 9) / 9.0F;
    }
    expect_whole_model_gradients(model, 40);
  }
}

// A small Mixtral (four experts of width 6, top 2, renormalised).
models::LlamaConfig small_mixtral() {
  models::LlamaConfig mixtral = small_llama(false);
  mixtral.variant = models::LlamaVariant::kMixtral;
  mixtral.experts = 4;
  mixtral.experts_per_token = 2;
  mixtral.expert_width = 6;
  mixtral.intermediate_size = 6;
  mixtral.renormalize_routing = true;
  return mixtral;
}

// The same as a Qwen3-MoE (top 3, a head_dim of its own).
models::LlamaConfig small_qwen3_moe(bool renormalize) {
  models::LlamaConfig qwen3_moe = small_mixtral();
  qwen3_moe.variant = models::LlamaVariant::kQwen3Moe;
  qwen3_moe.head_dim = 6;
  qwen3_moe.experts_per_token = 3;
  qwen3_moe.renormalize_routing = renormalize;
  return qwen3_moe;
}

// The routers' weights scaled up, so that each token's probabilities lie well apart: a step that
// changed a choice would make the loss jump.
void sharpen_routers(ParameterStore& store) {
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    if (!store.specs()[p].name.ends_with("mlp.gate.weight")) continue;
    for (std::size_t i = 0; i < store.count(p); ++i) store.value(p)[i] *= 40.0F;
  }
}

// Mixtures of Experts: Mixtral (renormalised weights) and Qwen3-MoE with and without
// norm_topk_prob: the router's, every expert's gate, up and down, through the grouped products.
TEST(WholeModelGradients, MixtralAndQwen3Moe) {
  for (const models::LlamaConfig& config :
       {small_mixtral(), small_qwen3_moe(false), small_qwen3_moe(true)}) {
    SCOPED_TRACE(models::to_string(config.variant) +
                 (config.renormalize_routing ? " renormalised" : ""));
    auto definition = std::make_shared<const models::LlamaDefinition>(config);
    DistributedModel model(definition, 7);
    sharpen_routers(model.parameters());
    expect_whole_model_gradients(model, 40);
  }
}

// Qwen3-MoE with dense layers among the routed ones (decoder_sparse_step 2: layers 0 and 2
// dense, layer 1 routed): the dense layers' gate, up and down of intermediate_size beside the
// routed layer's experts, with the auxiliary loss over the routed layer alone.
TEST(WholeModelGradients, AQwen3MoeWithDenseLayersAmongTheRouted) {
  models::LlamaConfig config = small_qwen3_moe(true);
  config.n_layer = 3;
  config.sparse_step = 2;         // layer 1 routes, 0 and 2 are dense
  config.intermediate_size = 10;  // the dense layers' width, not the experts'
  config.output_router_logits = true;
  config.router_aux_loss_coef = 4.0;
  auto definition = std::make_shared<const models::LlamaDefinition>(config);
  EXPECT_EQ(definition->manifest().transformer->dense_layers, (std::vector<std::size_t>{0, 2}));
  DistributedModel model(definition, 7);
  sharpen_routers(model.parameters());
  expect_whole_model_gradients(model, 40, true);
}

// The auxiliary load-balancing loss (output_router_logits) in the loss: its gradient reaches the
// routers through every layer's probabilities. Weighted heavily, so that a router gradient
// without it (or with another scale) is off by far more than the tolerance.
TEST(WholeModelGradients, TheAuxiliaryLoadBalancingLoss) {
  for (models::LlamaConfig config : {small_mixtral(), small_qwen3_moe(false)}) {
    SCOPED_TRACE(models::to_string(config.variant));
    config.output_router_logits = true;
    config.router_aux_loss_coef = 4.0;
    auto definition = std::make_shared<const models::LlamaDefinition>(config);
    DistributedModel model(definition, 7);
    sharpen_routers(model.parameters());
    expect_whole_model_gradients(model, 40, true);
    // Weighted as asked: the loss of its means is at least half its balanced value, k.
    EXPECT_GT(model.auxiliary_loss(),
              0.5F * static_cast<float>(config.router_aux_loss_coef * config.experts_per_token));
  }
}

// A capacity factor drops the choices past each expert's capacity of a sequence: the dropped
// add nothing forward and get no gradient backward (a small factor drops many here).
TEST(WholeModelGradients, AMixtureOfExpertsWithACapacity) {
  auto definition = std::make_shared<const models::LlamaDefinition>(small_mixtral());
  DistributedModel model(definition, 7, Precision::kFp32, DType::kF32, 0.5);
  sharpen_routers(model.parameters());
  expect_whole_model_gradients(model, 40, true);
  const ModelChunk::ExpertRows rows = model.expert_rows();
  EXPECT_GT(rows.dropped * 5, rows.routed) << rows.dropped << " of " << rows.routed;
  EXPECT_EQ(rows.computed + rows.dropped, rows.routed);
}

TEST(WholeModelGradients, Gpt) {
  testing::GptModel model(models::GptConfig{2, 2, 16, 8, 40}, 7);
  expect_whole_model_gradients(model, 40);
}

// bf16 mixed precision's backward: finite differences cannot see through its roundings (the
// loss moves in steps), so each parameter's gradient is held to the float32 model's, whose
// backward the checks above hold to the differences: within 3% of the parameter's largest
// gradient, on the same tokens, with some targets ignored. A product reading the wrong copy,
// operand or transposition is off by far more.
TEST(WholeModelGradients, Bf16GradientsAreFloat32sWithinItsRounding) {
  const std::vector<std::shared_ptr<const ModelDefinition>> definitions{
      std::make_shared<const models::GptDefinition>(models::GptConfig{2, 2, 16, 8, 40}),
      std::make_shared<const models::LlamaDefinition>(small_llama(false)),
      std::make_shared<const models::LlamaDefinition>(small_llama(true))};
  std::vector<std::int32_t> tokens(kSequences * kSeq), targets(kSequences * kSeq);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 7 + 3) % 40);
    targets[i] =
        i % 5 == 4 ? kernels::kIgnoredTarget : static_cast<std::int32_t>((i * 11 + 1) % 40);
  }
  for (const auto& definition : definitions) {
    SCOPED_TRACE(definition->describe());
    std::vector<float> grads[2];
    float losses[2] = {};
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      DistributedModel model(definition, 7, precision);
      model.parameters().zero_grads();
      const auto at = static_cast<std::size_t>(precision == Precision::kBf16);
      losses[at] = model.forward_backward(tokens, targets, kSequences, kSeq, true);
      grads[at].assign(model.parameters().grads().begin(), model.parameters().grads().end());
    }
    EXPECT_NEAR(losses[1], losses[0], 1e-2 * losses[0]);
    const ParameterStore store(definition->parameters());
    double worst = 0;
    for (std::size_t p = 0; p < store.specs().size(); ++p) {
      double largest = 0, deviation = 0;
      for (std::size_t i = store.offset(p); i < store.offset(p) + store.count(p); ++i) {
        largest = std::max(largest, std::abs(double{grads[0][i]}));
        deviation = std::max(deviation, std::abs(double{grads[1][i]} - grads[0][i]));
      }
      EXPECT_LE(deviation, 3e-2 * largest + 1e-5) << store.specs()[p].name;
      if (largest > 0) worst = std::max(worst, deviation / largest);
    }
    // (Not the loss: over these few tokens the roundings can leave its float32 sum unmoved.)
    EXPECT_GT(worst, 0) << "bf16 computed float32's gradients";
    std::cout << definition->family() << ": worst deviation " << worst
              << " of a parameter's largest gradient\n";
  }
}

// bf16 reads every parameter as its rounding: a model whose float32 masters are replaced by
// their roundings computes the same loss and gradients bit for bit, on every family (norms,
// biases, learned positions, tied and untied tables, queries' and keys' norms). In float32 the
// same replacement moves the loss, so the perturbed values matter. A part that read a norm, a
// bias or an embedding unrounded would compute from values ZeRO-3's bf16 gathers never hold.
TEST(WholeModelGradients, Bf16ReadsOnlyTheRoundingsOfItsParameters) {
  models::LlamaConfig qwen2 = small_llama(true);
  qwen2.variant = models::LlamaVariant::kQwen2;
  models::LlamaConfig qwen3 = small_llama(false);
  qwen3.variant = models::LlamaVariant::kQwen3;
  qwen3.attention_bias = true;
  const std::vector<std::shared_ptr<const ModelDefinition>> definitions{
      std::make_shared<const models::GptDefinition>(models::GptConfig{2, 2, 16, 8, 40}),
      std::make_shared<const models::LlamaDefinition>(small_llama(false)),
      std::make_shared<const models::LlamaDefinition>(qwen2),
      std::make_shared<const models::LlamaDefinition>(qwen3)};
  std::vector<std::int32_t> tokens(kSequences * kSeq);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(i * 7 % 40);
  for (const auto& definition : definitions) {
    SCOPED_TRACE(definition->describe());
    for (const Precision precision : {Precision::kBf16, Precision::kFp32}) {
      float losses[2] = {};
      std::vector<float> grads[2];
      for (const bool rounded : {false, true}) {
        DistributedModel model(definition, 7, precision);
        std::span<float> values = model.parameters().values();
        for (std::size_t i = 0; i < values.size(); ++i) {
          // Away from bf16's grid (norms start at 1, biases at 0).
          float v =
              values[i] + 0.01F * static_cast<float>(static_cast<int>(i * 37 % 19) - 9) / 9.0F;
          if (rounded) v = to_float(to_bfloat16(v));
          values[i] = v;
        }
        model.parameters().zero_grads();
        losses[rounded] = model.forward_backward(tokens, tokens, kSequences, kSeq, true);
        grads[rounded].assign(model.parameters().grads().begin(), model.parameters().grads().end());
      }
      if (precision == Precision::kBf16) {
        EXPECT_EQ(losses[1], losses[0]);
        EXPECT_EQ(grads[1], grads[0]);
      } else {
        EXPECT_NE(losses[1], losses[0]) << "float32 did not see the roundings";
      }
    }
  }
}

// The bf16 units (AVX512_BF16, AMX) compute the products of the roundings exactly as the
// float32 products of the widened roundings do, but for the order of the sums: a run with them
// and one without agree to float32's rounding.
TEST(WholeModelGradients, Bf16UnitsAndTheWidenedProductsAgree) {
  if (!kernels::bf16_units()) GTEST_SKIP() << "this CPU has no bf16 units";
  const auto definition = std::make_shared<const models::LlamaDefinition>(small_llama(true));
  std::vector<std::int32_t> tokens(kSequences * kSeq);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(i * 7 % 40);
  std::vector<float> losses, grads[2];
  for (const bool units : {true, false}) {
    kernels::use_bf16_units(units);
    DistributedModel model(definition, 7, Precision::kBf16);
    model.parameters().zero_grads();
    losses.push_back(model.forward_backward(tokens, tokens, kSequences, kSeq, true));
    grads[units ? 0 : 1].assign(model.parameters().grads().begin(),
                                model.parameters().grads().end());
  }
  kernels::use_bf16_units(std::nullopt);
  EXPECT_NEAR(losses[1], losses[0], 1e-5 * losses[0]);
  double largest = 0;
  for (const float g : grads[1]) largest = std::max(largest, std::abs(double{g}));
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    ASSERT_NEAR(grads[0][i], grads[1][i], 1e-4 * largest) << "element " << i;
  }
}

}  // namespace
}  // namespace shardwise::train

// The GPT cut into pipeline stages: stages run in sequence over micro-batches, each stage with a
// store of its own parameters only, give the whole model's loss and gradients (the tied token
// embedding's split between the first and the last stage, summing to the whole's).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
#include "shardwise/models/gpt.hpp"
#include "stage_checks.hpp"

namespace shardwise::models {
namespace {

using shardwise::testing::error_of;
using ::testing::HasSubstr;

TEST(GptStages, StagesOverMicrobatchesGiveTheWholeModelsLossAndGradients) {
  const GptConfig config{4, 2, 16, 8, 37};
  const std::size_t batch = 4, seq = 8, microbatches = 2, per = batch / microbatches;
  const std::vector<std::int32_t> tokens =
      stage_checks::draw_ids(batch * seq, 3, config.vocab_size);
  const std::vector<std::int32_t> targets =
      stage_checks::draw_ids(batch * seq, 4, config.vocab_size);

  train::ParameterStore whole(gpt_parameters(config));
  whole.initialize(11);
  whole.zero_grads();
  testing::GptChunk model(config, whole);
  const float loss = model.forward(tokens, targets, batch, seq);
  model.backward();

  for (const std::vector<GptStageRange>& cut :
       {std::vector<GptStageRange>{{0, 1}, {1, 3}, {3, 4}}, std::vector<GptStageRange>{{0, 4}},
        std::vector<GptStageRange>{{0, 2}, {2, 4}}}) {
    std::vector<std::unique_ptr<train::ParameterStore>> stores;
    std::vector<std::unique_ptr<testing::GptChunk>> stages;
    for (const GptStageRange& range : cut) {
      stores.push_back(
          std::make_unique<train::ParameterStore>(gpt_stage_parameters(config, range)));
      stores.back()->initialize(11);
      stores.back()->zero_grads();
      stages.push_back(std::make_unique<testing::GptChunk>(config, *stores.back(),
                                                           train::TensorParallel(), false, range));
    }
    const std::size_t boundary = stages.front()->boundary_elements(per, seq);
    // All forwards, then all backwards in reverse (GPipe's order), a slot per micro-batch.
    std::vector<std::vector<std::vector<float>>> activations(
        microbatches, std::vector<std::vector<float>>(cut.size() + 1));
    double mean = 0;
    for (std::size_t m = 0; m < microbatches; ++m) {
      const std::span<const std::int32_t> t(tokens.data() + m * per * seq, per * seq);
      const std::span<const std::int32_t> y(targets.data() + m * per * seq, per * seq);
      for (std::size_t s = 0; s < cut.size(); ++s) {
        auto& out = activations[m][s + 1];
        out.assign(s + 1 < cut.size() ? boundary : 0, 0.0F);
        mean += stages[s]->forward_stage(m, t, y, per, seq, activations[m][s], out) /
                static_cast<double>(microbatches);
      }
    }
    for (std::size_t m = microbatches; m-- > 0;) {
      std::vector<float> output_grad;
      for (std::size_t s = cut.size(); s-- > 0;) {
        std::vector<float> input_grad(s > 0 ? boundary : 0);
        stages[s]->backward_stage(m, output_grad, input_grad,
                                  1.0F / static_cast<float>(microbatches));
        output_grad = std::move(input_grad);
      }
    }
    EXPECT_NEAR(mean, loss, 1e-6 * loss) << cut.size() << " stages";
    stage_checks::StageGradients gradients(whole);
    for (const auto& store : stores) gradients.add(*store);
    gradients.expect_whole(std::to_string(cut.size()) + " stages");
    // Two micro-batches in flight keep two slots of activations.
    if (cut.size() == 3) {
      EXPECT_GT(stages[1]->activation_bytes(), 0U);
    }
  }
}

TEST(GptStages, AStageHoldsOnlyItsParameters) {
  const GptConfig config{4, 2, 16, 8, 37};
  const auto names = [&](GptStageRange range) {
    std::vector<std::string> out;
    for (const auto& spec : gpt_stage_parameters(config, range)) out.push_back(spec.name);
    return out;
  };
  const auto first = names({0, 1});
  EXPECT_EQ(first.front(), "transformer.wte.weight");
  EXPECT_EQ(first[1], "transformer.wpe.weight");
  EXPECT_EQ(first.back(), "transformer.h.0.mlp.c_proj.bias");
  const auto middle = names({1, 3});
  EXPECT_EQ(middle.size(), 2 * 12U);
  EXPECT_EQ(middle.front(), "transformer.h.1.ln_1.weight");
  const auto last = names({3, 4});
  EXPECT_EQ(last.front(), "transformer.wte.weight");  // the tied head
  EXPECT_EQ(last.back(), "transformer.ln_f.bias");
  EXPECT_EQ(last.size(), 1 + 12 + 2U);
  EXPECT_EQ(names({0, 4}).size(), gpt_parameters(config).size());
  EXPECT_THAT(error_of([&] {
                (void)gpt_stage_parameters(config, {2, 2});
              }),
              HasSubstr("a stage of layers 2 to 2 of the model's 4; expected at least one layer"));
  EXPECT_THAT(error_of([&] {
                (void)gpt_stage_parameters(config, {3, 5});
              }),
              HasSubstr("layers 3 to 5"));
  // A store without the stage's parameters is refused by name; a stage's passes check their
  // boundaries and slots.
  train::ParameterStore middle_store(gpt_stage_parameters(config, {1, 3}));
  EXPECT_THAT(error_of([&] {
                testing::GptChunk gpt(config, middle_store, train::TensorParallel(), false,
                                      GptStageRange{0, 3});
              }),
              HasSubstr("transformer.wte.weight"));
  middle_store.initialize(1);
  testing::GptChunk middle_gpt(config, middle_store, train::TensorParallel(), false,
                               GptStageRange{1, 3});
  std::vector<float> input(middle_gpt.boundary_elements(2, 8) - 1);
  std::vector<float> output(middle_gpt.boundary_elements(2, 8));
  EXPECT_THAT(error_of([&] { (void)middle_gpt.forward_stage(0, {}, {}, 2, 8, input, output); }),
              HasSubstr("a stage's input and output hold 256 floats"));
  EXPECT_THAT(error_of([&] { middle_gpt.backward_stage(3, output, output); }),
              HasSubstr("backward of micro-batch slot 3 before its forward"));
}

}  // namespace
}  // namespace shardwise::models

// The GPT end to end on one rank: its gradients against central differences of its loss, its
// initialisation as a function of name, index and seed, learning a pattern, and bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
#include "shardwise/kernels/adamw.hpp"
#include "shardwise/models/gpt.hpp"

namespace shardwise::models {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

std::vector<std::int32_t> pattern(std::size_t count, std::size_t offset, std::size_t period) {
  std::vector<std::int32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i)
    tokens[i] = static_cast<std::int32_t>((i + offset) % period);
  return tokens;
}

TEST(Gpt, GradientsMatchCentralDifferencesOfTheLoss) {
  const GptConfig config{2, 2, 8, 6, 11};
  train::ParameterStore store(gpt_parameters(config));
  store.initialize(7);
  // Larger than GPT-2's 0.02, so that every path carries a gradient well above float noise.
  for (float& v : store.values()) v *= 10.0F;
  for (const char* ln : {"transformer.ln_f.weight", "transformer.h.0.ln_1.weight"}) {
    float* w = store.value(store.index_of(ln));
    for (std::size_t i = 0; i < config.n_embd; ++i) w[i] = 1.0F + 0.1F * static_cast<float>(i);
  }
  testing::GptChunk gpt(config, store);
  const std::size_t batch = 2, seq = 5;
  const std::vector<std::int32_t> tokens{1, 4, 9, 10, 0, 3, 3, 7, 2, 5};
  const std::vector<std::int32_t> targets{4, 9, 10, 0, 3, 3, 7, 2, 5, 1};
  store.zero_grads();
  (void)gpt.forward(tokens, targets, batch, seq);
  gpt.backward();
  const std::vector<float> analytic(store.grads().begin(), store.grads().end());
  std::span<float> values = store.values();
  const float step = 2e-3F;
  std::size_t checked = 0;
  for (std::size_t i = 0; i < values.size(); i += 3) {
    const float saved = values[i];
    values[i] = saved + step;
    const double up = gpt.forward(tokens, targets, batch, seq);
    values[i] = saved - step;
    const double down = gpt.forward(tokens, targets, batch, seq);
    values[i] = saved;
    const double numeric = (up - down) / (2.0 * step);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 5e-2 * std::abs(numeric)) << "element " << i;
    ++checked;
  }
  EXPECT_GT(checked, 500U);
}

// Backward announces every parameter's gradients once, as soon as they are final: the final
// LayerNorm first, the blocks from the last, the embeddings (tied to the head) last.
TEST(Gpt, BackwardAnnouncesEachRangeOnceInBackwardOrder) {
  const GptConfig config{3, 2, 8, 4, 16};
  train::ParameterStore store(gpt_parameters(config));
  store.initialize(1);
  testing::GptChunk gpt(config, store);
  const std::vector<std::int32_t> tokens{1, 2, 3, 4};
  (void)gpt.forward(tokens, tokens, 1, 4);
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  gpt.backward([&](std::size_t begin, std::size_t end) { ranges.emplace_back(begin, end); });
  ASSERT_EQ(ranges.size(), 5U);
  const auto block = [&](std::size_t l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    return std::pair{store.offset(store.index_of(p + "ln_1.weight")),
                     store.offset(store.index_of(p + "mlp.c_proj.bias")) +
                         store.count(store.index_of(p + "mlp.c_proj.bias"))};
  };
  EXPECT_EQ(ranges[0].first, store.offset(store.index_of("transformer.ln_f.weight")));
  EXPECT_EQ(ranges[0].second, store.parameter_elements());
  EXPECT_EQ(ranges[1], block(2));
  EXPECT_EQ(ranges[2], block(1));
  EXPECT_EQ(ranges[3], block(0));
  EXPECT_EQ(ranges[4], (std::pair<std::size_t, std::size_t>{0, block(0).first}));
}

TEST(Gpt, InitialisationDependsOnNameIndexAndSeedOnly) {
  const GptConfig config{1, 2, 8, 4, 16};
  train::ParameterStore a(gpt_parameters(config));
  train::ParameterStore b(gpt_parameters(config));
  a.initialize(3);
  b.initialize(3);
  EXPECT_TRUE(std::equal(a.values().begin(), a.values().end(), b.values().begin()));
  const std::size_t wte = a.index_of("transformer.wte.weight");
  // Element i of a parameter is the same draw wherever it is computed.
  EXPECT_EQ(a.value(wte)[37], 0.02F * train::standard_normal_at(3, "transformer.wte.weight", 37));
  b.initialize(4);
  EXPECT_NE(a.value(wte)[0], b.value(wte)[0]);
  // Biases start at zero, LayerNorm weights at one.
  EXPECT_EQ(a.value(a.index_of("transformer.h.0.attn.c_attn.bias"))[5], 0.0F);
  EXPECT_EQ(a.value(a.index_of("transformer.ln_f.weight"))[2], 1.0F);
  // The draws are standard normal.
  double sum = 0, squares = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = train::standard_normal_at(11, "x", static_cast<std::uint64_t>(i));
    sum += x;
    squares += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(squares / n, 1.0, 0.05);
}

TEST(Gpt, LearnsARepeatingPattern) {
  const GptConfig config{2, 2, 32, 16, 16};
  train::ParameterStore store(gpt_parameters(config));
  store.initialize(1);
  testing::GptChunk gpt(config, store);
  std::vector<float> m(store.size()), v(store.size());
  kernels::AdamWSettings settings;
  settings.learning_rate = 1e-2F;
  const std::size_t batch = 4, seq = 16;
  float first = 0, last = 0;
  for (int step = 1; step <= 40; ++step) {
    std::vector<std::int32_t> tokens, targets;
    for (std::size_t b = 0; b < batch; ++b) {
      const auto row = pattern(seq + 1, static_cast<std::size_t>(step) * 3 + b, 7);
      tokens.insert(tokens.end(), row.begin(), row.end() - 1);
      targets.insert(targets.end(), row.begin() + 1, row.end());
    }
    store.zero_grads();
    const float loss = gpt.forward(tokens, targets, batch, seq);
    gpt.backward();
    kernels::adamw_update(store.values().data(), store.grads().data(), m.data(), v.data(),
                          store.size(), settings, step);
    if (step == 1) first = loss;
    last = loss;
  }
  EXPECT_NEAR(first, std::log(16.0F), 0.3F);  // near uniform at the start
  EXPECT_LT(last, 0.2F * first) << "first " << first << ", last " << last;
}

TEST(Gpt, BadInputIsNamed) {
  EXPECT_THAT(error_of([] { (void)gpt_preset("huge", "--model"); }),
              HasSubstr("--model: 'huge' is not a model"));
  EXPECT_THAT(error_of([] {
                validate(GptConfig{2, 3, 8, 4, 16});
              }),
              HasSubstr("n_embd 8 is not divisible by n_head 3"));
  EXPECT_THAT(error_of([] { validate(GptConfig{0, 1, 8, 4, 16}); }), HasSubstr("n_layer is 0"));
  const GptConfig config{1, 1, 4, 4, 8};
  train::ParameterStore store(gpt_parameters(config));
  testing::GptChunk gpt(config, store);
  const std::vector<std::int32_t> bad{1, 2, 9, 3};
  const std::vector<std::int32_t> fine{1, 2, 3, 4};
  EXPECT_THAT(error_of([&] { (void)gpt.forward(bad, fine, 1, 4); }),
              HasSubstr("token 9 is outside the vocabulary 0..7"));
  const std::vector<std::int32_t> longer(5, 1);
  EXPECT_THAT(error_of([&] { (void)gpt.forward(longer, longer, 1, 5); }),
              HasSubstr("sequences of 5 tokens; expected at least one sequence of 1 to 4 tokens"));
  EXPECT_THAT(error_of([&] { gpt.backward(); }),
              HasSubstr("backward of micro-batch slot 0 before its forward"));
  EXPECT_THAT(
      error_of([] {
        train::ParameterStore twice({{"w", {2}, {}, {}, true, ""}, {"w", {3}, {}, {}, true, ""}});
      }),
      HasSubstr("parameter 'w' is declared twice"));
}

}  // namespace
}  // namespace shardwise::models

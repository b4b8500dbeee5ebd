// Fine-tuning examples as the trainer reads them: one example a row, padded and cut, targets not
// counted ignored; every epoch draws each example once; the loss over counted targets is the
// models' own loss on the counted part alone (forward and every gradient), for the GPT and the
// Llama; and the loss scale makes a batch's mean one over its counted targets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/train/corpus.hpp"
#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/example_set.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

constexpr std::int32_t kIgnored = kernels::kIgnoredTarget;

// Example e: tokens 10 + e, 11 + e, ... of length 3 + e % 7, the second half counted.
std::shared_ptr<ExampleSet> numbered_examples(std::size_t count, const std::string& name) {
  auto set = std::make_shared<ExampleSet>(name);
  for (std::size_t e = 0; e < count; ++e) {
    const std::size_t length = 3 + e % 7;
    std::vector<std::int32_t> tokens(length);
    std::vector<std::uint8_t> counted(length);
    for (std::size_t t = 0; t < length; ++t) {
      tokens[t] = static_cast<std::int32_t>(10 + e + t);
      counted[t] = t >= length / 2 ? 1 : 0;
    }
    set->add(tokens, counted);
  }
  return set;
}

TEST(ExampleRows, ARowIsTheExamplePaddedWithItsUncountedTargetsIgnored) {
  ExampleSet set("examples");
  const std::vector<std::int32_t> tokens{5, 6, 7, 8};
  set.add(tokens, std::vector<std::uint8_t>{1, 0, 1, 1});  // the first token is nobody's target
  EXPECT_EQ(set.counted(0)[0], 0);
  const ExampleRows rows(set, 0, 1, 6, 16);
  std::vector<std::int32_t> row_tokens, targets;
  rows.append_row(0, false, 1, row_tokens, targets);
  EXPECT_EQ(row_tokens, (std::vector<std::int32_t>{5, 6, 7, 0, 0, 0}));
  EXPECT_EQ(targets, (std::vector<std::int32_t>{kIgnored, 7, 8, kIgnored, kIgnored, kIgnored}));
  EXPECT_EQ(rows.counted_targets(0, false, 1), 2U);
  EXPECT_NEAR(rows.padding_share(), 3.0 / 6.0, 1e-12);
  // Cut to seq + 1 tokens: rows of 2 positions predict tokens 1 and 2.
  const ExampleRows short_rows(set, 0, 1, 2, 16);
  row_tokens.clear();
  targets.clear();
  short_rows.append_row(0, false, 1, row_tokens, targets);
  EXPECT_EQ(row_tokens, (std::vector<std::int32_t>{5, 6}));
  EXPECT_EQ(targets, (std::vector<std::int32_t>{kIgnored, 7}));
  EXPECT_EQ(short_rows.cut(), 1U);
}

TEST(ExampleRows, ExamplesWithNothingCountedInARowAreLeftOutAndNoneLeftIsRefused) {
  ExampleSet set("--data 'chat.jsonl'");
  set.add(std::vector<std::int32_t>{1, 2, 3, 4}, std::vector<std::uint8_t>{0, 0, 0, 1});
  set.add(std::vector<std::int32_t>{1, 2}, std::vector<std::uint8_t>{0, 1});
  const ExampleRows rows(set, 0, 2, 2, 16);  // the first example's counted token is cut away
  EXPECT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows.left_out(), 1U);
  EXPECT_THAT(error_of([&] { (void)ExampleRows(set, 0, 1, 2, 16); }),
              HasSubstr("--data 'chat.jsonl': examples 1 to 1 of its 2 has no counted token"));
  EXPECT_THAT(error_of([&] { (void)ExampleRows(set, 0, 2, 8, 3); }),
              HasSubstr("example 1's token 2 is the id 3, outside the model's vocabulary 0..2"));
  EXPECT_THAT(error_of([&] {
                set.add(std::vector<std::int32_t>{1, 2}, std::vector<std::uint8_t>{1});
              }),
              HasSubstr("an example of 2 tokens was given 1 marks"));
}

TEST(ExampleRows, EveryEpochDrawsEachExampleOnceInAnOrderOfItsOwn) {
  const auto set = numbered_examples(37, "examples");
  const ExampleRows rows(*set, 0, set->size(), 16, 64);
  std::vector<std::vector<std::int32_t>> epochs;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::multiset<std::int32_t> firsts;
    std::vector<std::int32_t> order;
    for (std::uint64_t i = 0; i < 37; ++i) {
      std::vector<std::int32_t> tokens, targets;
      rows.append_row(epoch * 37 + i, true, 9, tokens, targets);
      firsts.insert(tokens[0]);
      order.push_back(tokens[0]);
    }
    for (std::int32_t e = 0; e < 37; ++e) EXPECT_EQ(firsts.count(10 + e), 1U) << "epoch " << epoch;
    epochs.push_back(order);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  // Held-out rows are in file order.
  for (std::uint64_t i = 0; i < 40; ++i) {
    std::vector<std::int32_t> tokens, targets;
    rows.append_row(i, false, 9, tokens, targets);
    EXPECT_EQ(tokens[0], static_cast<std::int32_t>(10 + i % 37));
  }
}

TEST(Corpus, ExamplesHoldOutTheLastTenthAndScaleToTheCountedTargets) {
  const auto set = numbered_examples(30, "examples");
  const Corpus corpus(set, nullptr, 12, 64);
  ASSERT_NE(corpus.train_rows(), nullptr);
  EXPECT_EQ(corpus.train_rows()->size(), 27U);
  EXPECT_EQ(corpus.val_rows()->size(), 3U);
  // Held-out batch 0 is examples 27, 28 and 29.
  std::size_t counted = 0;
  for (std::size_t s = 0; s < 3; ++s) {
    counted += corpus.val_rows()->counted_targets(s, false, 1);
  }
  const float scale = corpus.loss_scale(Corpus::Split::kValidation, 1, 0, 3, 12);
  EXPECT_FLOAT_EQ(scale, static_cast<float>(3.0 * 12.0 / static_cast<double>(counted)));
  const TokenBatch batch = corpus.batch(Corpus::Split::kValidation, 1, 0, 3, 0, 3, 12);
  const auto ignored =
      static_cast<std::size_t>(std::count(batch.targets.begin(), batch.targets.end(), kIgnored));
  EXPECT_EQ(batch.targets.size() - ignored, counted);
  // A rank's share is the global batch's rows.
  const TokenBatch tail = corpus.batch(Corpus::Split::kTrain, 1, 4, 6, 4, 2, 12);
  const TokenBatch whole = corpus.batch(Corpus::Split::kTrain, 1, 4, 6, 0, 6, 12);
  EXPECT_TRUE(std::equal(tail.tokens.begin(), tail.tokens.end(), whole.tokens.begin() + 4 * 12));
  EXPECT_FALSE(corpus.notes().empty());
  EXPECT_THAT(error_of([&] { (void)Corpus(numbered_examples(1, "one"), nullptr, 12, 64); }),
              HasSubstr("one has 1 examples"));
}

// The mean over counted targets equals the model's loss on the counted part alone: a row whose
// targets past position k are ignored, scaled by seq / k, is the row cut to k positions (attention
// is causal), in value and in every parameter's gradient.
void expect_masked_equals_cut(DistributedModel& masked, DistributedModel& cut) {
  const std::size_t seq = 12, k = 7;
  std::vector<std::int32_t> tokens(seq), targets(seq);
  for (std::size_t t = 0; t < seq; ++t) {
    tokens[t] = static_cast<std::int32_t>((t * 37 + 5) % 200);
    targets[t] = t < k ? static_cast<std::int32_t>((t * 53 + 11) % 200) : kIgnored;
  }
  const std::vector<std::int32_t> cut_tokens(tokens.begin(), tokens.begin() + k);
  const std::vector<std::int32_t> cut_targets(targets.begin(), targets.begin() + k);
  masked.parameters().zero_grads();
  cut.parameters().zero_grads();
  const float scale = static_cast<float>(seq) / static_cast<float>(k);
  const float a = masked.forward_backward(tokens, targets, 1, seq, true, {}, scale);
  const float b = cut.forward_backward(cut_tokens, cut_targets, 1, k, true);
  EXPECT_NEAR(a, b, 1e-5F * b);
  const std::span<const float> ga = masked.parameters().grads();
  const std::span<const float> gb = cut.parameters().grads();
  ASSERT_EQ(ga.size(), gb.size());
  double largest = 0;
  for (std::size_t i = 0; i < ga.size(); ++i) largest = std::max(largest, std::abs(double{gb[i]}));
  ASSERT_GT(largest, 0.0);
  for (std::size_t i = 0; i < ga.size(); ++i) {
    ASSERT_NEAR(ga[i], gb[i], 1e-5 * largest) << "gradient element " << i;
  }
  // The ignored positions change nothing: other tokens there give the same loss.
  std::vector<std::int32_t> other = tokens;
  for (std::size_t t = k; t < seq; ++t) other[t] = 3;
  EXPECT_FLOAT_EQ(masked.forward_backward(other, targets, 1, seq, false, {}, scale), a);
}

TEST(MaskedLoss, TheGptsLossOverCountedTargetsIsItsLossOnThemAlone) {
  const models::GptConfig config{2, 2, 16, 16, 256};
  testing::GptModel masked(config, 42);
  testing::GptModel cut(config, 42);
  expect_masked_equals_cut(masked, cut);
}

TEST(MaskedLoss, TheLlamasLossOverCountedTargetsIsItsLossOnThemAlone) {
  models::LlamaConfig config;
  config.n_layer = 2;
  config.hidden_size = 32;
  config.head_dim = 8;
  config.intermediate_size = 48;
  config.context_length = 16;
  auto definition = std::make_shared<const models::LlamaDefinition>(config);
  DistributedModel masked(definition, 42);
  DistributedModel cut(definition, 42);
  expect_masked_equals_cut(masked, cut);
}

}  // namespace
}  // namespace shardwise::train

// Every data-parallel layout trains the same model as one rank: the same global batches, the
// gradients averaged over the group, AdamW on the elements each rank owns (ZeRO 1 and 2 over
// the flat buffer). Losses and final parameters are compared with the one-rank run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>
#include <vector>

#include "error_of.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

const models::GptConfig kConfig{2, 2, 16, 16, 256};

TrainSettings settings_for(int zero) {
  TrainSettings s;
  s.batch = 8;
  s.seq = 16;
  s.steps = 10;
  s.warmup = 2;
  s.learning_rate = 3e-3F;
  s.zero = zero;
  s.seed = 5;
  return s;
}

struct TrainingRun {
  std::vector<float> losses;
  std::vector<float> params;  // rank 0's after the last step
  std::vector<std::size_t> optimizer_bytes;
};

TrainingRun train_on(int ranks, int zero) {
  const Corpus corpus = Corpus::builtin(16);
  TrainingRun run;
  run.optimizer_bytes.resize(static_cast<std::size_t>(ranks));
  std::mutex mutex;
  run_local(ranks, [&](Communicator& comm) {
    models::GptModel model(kConfig, 42);
    Trainer trainer(comm, world_group(ranks), model, corpus, settings_for(zero));
    std::vector<float> losses;
    for (int step = 0; step < 10; ++step) losses.push_back(trainer.step().loss);
    std::lock_guard lock(mutex);
    run.optimizer_bytes[static_cast<std::size_t>(comm.rank())] = trainer.optimizer_bytes();
    if (comm.rank() == 0) {
      run.losses = losses;
      const auto values = model.parameters().values();
      run.params.assign(
          values.begin(),
          values.begin() + static_cast<std::ptrdiff_t>(model.parameters().parameter_elements()));
    }
  });
  return run;
}

TEST(Trainer, EveryDataParallelLayoutMatchesOneRank) {
  const TrainingRun one = train_on(1, 0);
  ASSERT_EQ(one.losses.size(), 10U);
  EXPECT_LT(one.losses.back(), one.losses.front());
  for (const auto& [ranks, zero] :
       std::vector<std::pair<int, int>>{{2, 0}, {4, 0}, {2, 1}, {2, 2}, {4, 1}, {4, 2}}) {
    const TrainingRun many = train_on(ranks, zero);
    double worst = 0;
    for (std::size_t s = 0; s < one.losses.size(); ++s) {
      const double relative = std::abs(many.losses[s] - one.losses[s]) / std::abs(one.losses[s]);
      worst = std::max(worst, relative);
      EXPECT_LT(relative, 1e-5) << ranks << " ranks, zero " << zero << ", step " << s + 1;
    }
    double largest = 0;
    for (std::size_t i = 0; i < one.params.size(); ++i) {
      largest = std::max(largest, static_cast<double>(std::abs(many.params[i] - one.params[i])));
    }
    EXPECT_LT(largest, 1e-4) << ranks << " ranks, zero " << zero;
    // ZeRO shards the optimizer state: exactly a 1/ranks part of the padded buffer each.
    if (zero > 0) {
      for (std::size_t bytes : many.optimizer_bytes) {
        EXPECT_EQ(bytes * static_cast<std::size_t>(ranks) % 8, 0U);
        EXPECT_LE(bytes * static_cast<std::size_t>(ranks), one.optimizer_bytes[0] + 8 * 4 * 2);
      }
    }
    std::ostringstream deviation;
    deviation << std::scientific << worst << " (loss), " << largest << " (parameters)";
    RecordProperty(
        std::to_string(ranks) + "_ranks_zero_" + std::to_string(zero) + "_worst_deviation",
        deviation.str());
  }
}

// A model that announces no gradients (no backward hook) still has every gradient averaged.
class SilentGpt final : public Model {
 public:
  SilentGpt() : inner_(kConfig, 42) {}
  ParameterStore& parameters() override { return inner_.parameters(); }
  float loss(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
             std::size_t sequences, std::size_t seq, bool with_grads,
             const GradientsReady& /*ready*/) override {
    return inner_.loss(tokens, targets, sequences, seq, with_grads);
  }

 private:
  models::GptModel inner_;
};

TEST(Trainer, AModelWithoutTheBackwardHookTrainsTheSame) {
  const Corpus corpus = Corpus::builtin(16);
  std::vector<float> hooked, silent;
  for (bool use_hook : {true, false}) {
    run_local(2, [&](Communicator& comm) {
      models::GptModel gpt(kConfig, 42);
      SilentGpt quiet;
      Model& model = use_hook ? static_cast<Model&>(gpt) : static_cast<Model&>(quiet);
      Trainer trainer(comm, world_group(2), model, corpus, settings_for(0));
      std::vector<float> losses;
      for (int step = 0; step < 4; ++step) losses.push_back(trainer.step().loss);
      if (comm.rank() == 0) (use_hook ? hooked : silent) = losses;
    });
  }
  EXPECT_EQ(hooked, silent);
}

// HSDP on a 2 x 2 mesh: ZeRO shards over fsdp, the shards are replicated over data. The same
// losses as one rank, and each rank keeps half of the optimizer state (one fsdp shard).
TEST(Trainer, HsdpShardsOverFsdpAndReplicatesOverData) {
  const TrainingRun one = train_on(1, 0);
  const Corpus corpus = Corpus::builtin(16);
  const Mesh mesh({"data", "fsdp"}, {2, 2});
  for (int zero : {0, 1, 2}) {
    std::vector<float> losses;
    std::vector<std::size_t> bytes(4);
    run_local(4, [&](Communicator& comm) {
      models::GptModel model(kConfig, 42);
      Trainer trainer(comm, group_along(mesh, {"fsdp"}, comm.rank()),
                      group_along(mesh, {"data"}, comm.rank()), model, corpus, settings_for(zero));
      std::vector<float> mine;
      for (int step = 0; step < 10; ++step) mine.push_back(trainer.step().loss);
      bytes[static_cast<std::size_t>(comm.rank())] = trainer.optimizer_bytes();
      if (comm.rank() == 0) losses = mine;
    });
    for (std::size_t s = 0; s < one.losses.size(); ++s) {
      EXPECT_NEAR(losses[s], one.losses[s], 1e-5 * one.losses[s])
          << "zero " << zero << " step " << s + 1;
    }
    for (std::size_t b : bytes) {
      if (zero == 0) {
        EXPECT_EQ(b, one.optimizer_bytes[0]);
      } else {
        EXPECT_LE(b * 2, one.optimizer_bytes[0] + 2 * 4 * 2) << "zero " << zero;
        EXPECT_GE(b * 2, one.optimizer_bytes[0]) << "zero " << zero;
      }
    }
  }
}

TEST(Trainer, LearningRateWarmsUpThenDecaysToItsFloor) {
  TrainSettings s;
  s.learning_rate = 1.0F;
  s.warmup = 4;
  s.steps = 14;
  s.min_learning_rate_ratio = 0.1F;
  EXPECT_FLOAT_EQ(learning_rate_at(s, 1), 0.25F);
  EXPECT_FLOAT_EQ(learning_rate_at(s, 4), 1.0F);
  EXPECT_NEAR(learning_rate_at(s, 9), 0.55F, 1e-6);  // half way down the cosine
  EXPECT_FLOAT_EQ(learning_rate_at(s, 14), 0.1F);
  EXPECT_FLOAT_EQ(learning_rate_at(s, 20), 0.1F);
}

TEST(Trainer, BadSettingsAreNamed) {
  const Corpus corpus = Corpus::builtin(16);
  EXPECT_THAT(error_of([&] {
                run_local(3, [&](Communicator& comm) {
                  models::GptModel model(kConfig, 1);
                  Trainer trainer(comm, world_group(3), model, corpus, settings_for(0));
                });
              }),
              HasSubstr("--batch 8 does not divide among the 3 data-parallel ranks"));
  EXPECT_THAT(error_of([&] {
                run_local(1, [&](Communicator& comm) {
                  models::GptModel model(kConfig, 1);
                  Trainer trainer(comm, world_group(1), model, corpus, settings_for(3));
                });
              }),
              HasSubstr("--zero 3 is not 0, 1 or 2"));
  EXPECT_THAT(error_of([] { (void)Corpus("too short", 16); }),
              HasSubstr("the data has 9 bytes; sequences of 16 tokens need at least 170"));
}

TEST(Corpus, BatchesDependOnStepAndSequenceOnly) {
  const Corpus corpus = Corpus::builtin(8);
  const TokenBatch whole = corpus.batch(Corpus::Split::kTrain, 3, 7, 0, 4, 8);
  const TokenBatch tail = corpus.batch(Corpus::Split::kTrain, 3, 7, 2, 2, 8);
  EXPECT_TRUE(std::equal(tail.tokens.begin(), tail.tokens.end(), whole.tokens.begin() + 16));
  for (std::size_t i = 0; i + 1 < 8; ++i) EXPECT_EQ(whole.targets[i], whole.tokens[i + 1]);
  const TokenBatch other = corpus.batch(Corpus::Split::kTrain, 3, 8, 0, 4, 8);
  EXPECT_NE(other.tokens, whole.tokens);
}

}  // namespace
}  // namespace shardwise::train

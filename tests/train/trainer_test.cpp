// Every data-parallel layout trains the same model as one rank: the same global batches, the
// gradients averaged over the group, AdamW on the elements each rank owns (under ZeRO, the
// blocks its parameter shardings give it). Losses and final parameters are compared with the
// one-rank run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>
#include <vector>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
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
  std::vector<std::size_t> params_bytes;
  std::vector<std::size_t> grads_bytes;
  std::vector<std::size_t> optimizer_bytes;
};

TrainingRun train_on(int ranks, const TrainSettings& settings) {
  const Corpus corpus = Corpus::builtin(16);
  TrainingRun run;
  for (auto* bytes : {&run.params_bytes, &run.grads_bytes, &run.optimizer_bytes}) {
    bytes->resize(static_cast<std::size_t>(ranks));
  }
  std::mutex mutex;
  run_local(ranks, [&](Communicator& comm) {
    testing::GptModel model(kConfig, 42);
    ParallelContext context(comm, Mesh({"data"}, {ranks}));
    Trainer trainer(context, model, corpus, settings);
    std::vector<float> losses;
    for (int step = 0; step < 10; ++step) losses.push_back(trainer.step().loss);
    std::vector<float> params = trainer.full_parameters();
    std::lock_guard lock(mutex);
    const auto r = static_cast<std::size_t>(comm.rank());
    run.params_bytes[r] = trainer.params_bytes();
    run.grads_bytes[r] = trainer.grads_bytes();
    run.optimizer_bytes[r] = trainer.optimizer_bytes();
    if (comm.rank() == 0) {
      run.losses = losses;
      run.params = std::move(params);
    }
  });
  return run;
}

TrainingRun train_on(int ranks, int zero) { return train_on(ranks, settings_for(zero)); }

// The largest relative deviation of `many`'s losses from `one`'s.
double worst_loss_deviation(const TrainingRun& one, const TrainingRun& many) {
  double worst = 0;
  for (std::size_t s = 0; s < one.losses.size(); ++s) {
    worst = std::max(worst, std::abs(static_cast<double>(many.losses[s] - one.losses[s])) /
                                std::abs(static_cast<double>(one.losses[s])));
  }
  return worst;
}

double largest_parameter_deviation(const TrainingRun& one, const TrainingRun& many) {
  double largest = 0;
  for (std::size_t i = 0; i < one.params.size(); ++i) {
    largest = std::max(largest, static_cast<double>(std::abs(many.params[i] - one.params[i])));
  }
  return largest;
}

// Two ranks, each with its own settings, take a first step: what each ended with (empty where
// it ended without an error).
std::vector<std::string> first_step_errors(const Corpus& corpus, const Mesh& mesh,
                                           const TrainSettings (&settings)[2], std::uint64_t seed) {
  std::vector<std::string> errors(2);
  run_local(2, [&](Communicator& comm) {
    const auto rank = static_cast<std::size_t>(comm.rank());
    testing::GptModel model(kConfig, seed);
    try {
      ParallelContext context(comm, mesh);
      Trainer trainer(context, model, corpus, settings[rank]);
      (void)trainer.step();
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
  });
  return errors;
}

TEST(Trainer, EveryDataParallelLayoutMatchesOneRank) {
  const TrainingRun one = train_on(1, 0);
  ASSERT_EQ(one.losses.size(), 10U);
  EXPECT_LT(one.losses.back(), one.losses.front());
  for (const auto& [ranks, zero] : std::vector<std::pair<int, int>>{
           {2, 0}, {4, 0}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {2, 3}, {4, 3}}) {
    const TrainingRun many = train_on(ranks, zero);
    const double worst = worst_loss_deviation(one, many);
    EXPECT_LT(worst, 1e-5) << ranks << " ranks, zero " << zero;
    const double largest = largest_parameter_deviation(one, many);
    EXPECT_LT(largest, 1e-4) << ranks << " ranks, zero " << zero;
    // ZeRO shards the optimizer state: every dimension 0 of the model divides by 2 and 4, so
    // each rank keeps exactly a 1/ranks part.
    if (zero > 0) {
      for (std::size_t bytes : many.optimizer_bytes) {
        EXPECT_EQ(bytes * static_cast<std::size_t>(ranks), one.optimizer_bytes[0]);
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
  float forward_backward(std::span<const std::int32_t> tokens,
                         std::span<const std::int32_t> targets, std::size_t sequences,
                         std::size_t seq, bool with_grads, const GradientsReady& /*ready*/,
                         float loss_scale) override {
    return inner_.forward_backward(tokens, targets, sequences, seq, with_grads, {}, loss_scale);
  }

 private:
  testing::GptModel inner_;
};

TEST(Trainer, AModelWithoutTheBackwardHookTrainsTheSame) {
  const Corpus corpus = Corpus::builtin(16);
  std::vector<float> hooked, silent;
  for (bool use_hook : {true, false}) {
    run_local(2, [&](Communicator& comm) {
      testing::GptModel gpt(kConfig, 42);
      SilentGpt quiet;
      Model& model = use_hook ? static_cast<Model&>(gpt) : static_cast<Model&>(quiet);
      ParallelContext context(comm, Mesh({"data"}, {2}));
      Trainer trainer(context, model, corpus, settings_for(0));
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
  for (int zero : {0, 1, 2, 3}) {
    std::vector<float> losses;
    std::vector<std::size_t> bytes(4);
    run_local(4, [&](Communicator& comm) {
      testing::GptModel model(kConfig, 42);
      ParallelContext context(comm, mesh);
      Trainer trainer(context, model, corpus, settings_for(zero));
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
      EXPECT_EQ(zero == 0 ? b : b * 2, one.optimizer_bytes[0]) << "zero " << zero;
    }
  }
}

// ZeRO-3 keeps its block of every parameter: the bytes per rank are the sum of the parameters'
// shard shapes, here (every dimension 0 divisible) exactly the one-rank bytes divided by n, and
// nothing gathered outlives a step.
TEST(Trainer, ZeroThreeKeepsItsBlockOfEveryParameter) {
  const TrainingRun one = train_on(1, 0);
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kConfig);
  for (int ranks : {2, 4}) {
    const auto n = static_cast<std::size_t>(ranks);
    const auto slice =
        static_cast<std::size_t>(default_shardings(specs, "world", ranks).shard_elements(specs));
    const TrainingRun many = train_on(ranks, 3);
    for (int r = 0; r < ranks; ++r) {
      const auto i = static_cast<std::size_t>(r);
      EXPECT_EQ(many.params_bytes[i], slice * sizeof(float)) << ranks << " ranks";
      EXPECT_EQ(many.grads_bytes[i], slice * sizeof(float)) << ranks << " ranks";
      EXPECT_EQ(many.optimizer_bytes[i], 2 * slice * sizeof(float)) << ranks << " ranks";
      EXPECT_EQ(many.params_bytes[i] * n, one.params_bytes[0]) << ranks << " ranks";
    }
  }
}

// Shardings other than the default: FSDP's logical axes (dimension 1 of most weights, norms
// and some biases replicated), and a group of 3 that divides few dimensions (dimension 0, else
// 1, else replicated). Each stage still trains the one-rank model, and keeps exactly the bytes
// the shardings' shard shapes add up to.
TEST(Trainer, AnyShardingsOfTheStrategiesTrainTheOneRankModel) {
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kConfig);
  const FSDPStrategy fsdp("world", std::nullopt, 1);
  TrainSettings by_axes = settings_for(0);
  by_axes.shardings = fsdp_shardings(specs, fsdp, 2, FsdpSplit::kLogicalAxes);
  TrainSettings of_three = settings_for(0);
  of_three.batch = 6;
  of_three.shardings = default_shardings(specs, "world", 3);
  for (const auto& [ranks, base] :
       std::vector<std::pair<int, TrainSettings>>{{2, by_axes}, {3, of_three}}) {
    TrainSettings single = base;
    single.shardings.reset();
    const TrainingRun one = train_on(1, single);
    const auto slice = static_cast<std::size_t>(base.shardings->shard_elements(specs));
    EXPECT_GT(slice * static_cast<std::size_t>(ranks), one.params_bytes[0] / sizeof(float))
        << "some parameters are replicated";
    for (int zero : {1, 2, 3}) {
      TrainSettings settings = base;
      settings.zero = zero;
      const TrainingRun many = train_on(ranks, settings);
      EXPECT_LT(worst_loss_deviation(one, many), 1e-5) << ranks << " ranks, zero " << zero;
      EXPECT_LT(largest_parameter_deviation(one, many), 1e-4) << ranks << " ranks, zero " << zero;
      for (std::size_t bytes : many.optimizer_bytes) {
        EXPECT_EQ(bytes, 2 * slice * sizeof(float)) << ranks << " ranks, zero " << zero;
      }
      if (zero == 3) {
        for (std::size_t bytes : many.params_bytes) EXPECT_EQ(bytes, slice * sizeof(float));
      }
    }
  }
}

TEST(Trainer, ZeroThreeGathersAheadAndFreesWhatItGathered) {
  const Corpus corpus = Corpus::builtin(16);
  const ParameterStore store(models::gpt_parameters(kConfig));
  std::size_t largest_unit = 0;
  for (const ParameterUnit& unit : store.units()) largest_unit = std::max(largest_unit, unit.count);
  // Forward gathers the embeddings, every block, the final norm and the embeddings again (the
  // tied head); backward every block again.
  const std::size_t gathers = 2 * kConfig.n_layer + 3;
  run_local(4, [&](Communicator& comm) {
    testing::GptModel model(kConfig, 42);
    ParallelContext context(comm, Mesh({"data"}, {4}));
    Trainer trainer(context, model, corpus, settings_for(3));
    (void)trainer.step();
    // The first step records the order: every gather waits.
    EXPECT_EQ(trainer.gathers_prefetched_and_waited(), std::make_pair(std::size_t{0}, gathers));
    EXPECT_EQ(trainer.gathered_bytes(), 0U);
    for (int step = 0; step < 3; ++step) {
      (void)trainer.step();
      // Then only the first waits; each gather started the next one.
      EXPECT_EQ(trainer.gathers_prefetched_and_waited(),
                std::make_pair(gathers - 1, std::size_t{1}));
      EXPECT_EQ(trainer.gathered_bytes(), 0U);
    }
    // At most: the head's two units held for backward, a block in use, the next one arriving,
    // and full gradients of the embeddings, the block in backward and two being reduced.
    EXPECT_GT(trainer.gathered_peak_bytes(), 0U);
    EXPECT_LE(trainer.gathered_peak_bytes(), 8 * (largest_unit + 4) * sizeof(float));
    // Freed buffers are kept for the next units (the steps above reused them: the parity tests
    // prove their earlier contents never leak), within the peak.
    EXPECT_GT(trainer.gather_buffers_kept_bytes(), 0U);
    EXPECT_LE(trainer.gather_buffers_kept_bytes(), trainer.gathered_peak_bytes());
    (void)trainer.validation_loss(2);
    EXPECT_EQ(trainer.gathered_bytes(), 0U);
  });
}

// Without overlap (the benchmark's baseline) the same losses, and every ZeRO-3 gather waits.
TEST(Trainer, WithoutOverlapTheSameLossesAndNoGatherAhead) {
  const Corpus corpus = Corpus::builtin(16);
  for (int zero : {0, 3}) {
    std::vector<float> losses[2];
    for (bool overlap : {true, false}) {
      run_local(2, [&](Communicator& comm) {
        testing::GptModel model(kConfig, 42);
        TrainSettings settings = settings_for(zero);
        settings.overlap = overlap;
        ParallelContext context(comm, Mesh({"data"}, {2}));
        Trainer trainer(context, model, corpus, settings);
        std::vector<float> mine;
        for (int step = 0; step < 3; ++step) mine.push_back(trainer.step().loss);
        if (zero == 3 && !overlap) {
          EXPECT_EQ(trainer.gathers_prefetched_and_waited().first, 0U);
        }
        if (comm.rank() == 0) losses[overlap ? 0 : 1] = mine;
      });
    }
    ASSERT_EQ(losses[0].size(), 3U);
    for (std::size_t s = 0; s < 3; ++s) EXPECT_FLOAT_EQ(losses[0][s], losses[1][s]) << zero;
  }
}

// A model that reads a parameter without gathering its unit is told which, on every rank.
class CarelessModel final : public Model {
 public:
  CarelessModel() : store_({{"w", {8}, {}, {}, true, "layer"}}) {}
  ParameterStore& parameters() override { return store_; }
  float forward_backward(std::span<const std::int32_t> /*tokens*/,
                         std::span<const std::int32_t> /*targets*/, std::size_t /*sequences*/,
                         std::size_t /*seq*/, bool /*with_grads*/, const GradientsReady& /*ready*/,
                         float /*loss_scale*/) override {
    return *store_.value(0);
  }

 private:
  ParameterStore store_;
};

TEST(Trainer, ZeroThreeNamesAParameterReadWithoutItsUnit) {
  const Corpus corpus = Corpus::builtin(16);
  EXPECT_THAT(error_of([&] {
                run_local(2, [&](Communicator& comm) {
                  CarelessModel model;
                  ParallelContext context(comm, Mesh({"data"}, {2}));
                  Trainer trainer(context, model, corpus, settings_for(3));
                  (void)trainer.step();
                });
              }),
              HasSubstr("parameter 'w' was read while its unit 'layer' is not gathered"));
}

// Rank 1's model fails in its second forward with units gathered and the next one's gather in
// flight: every rank's run ends with that error, none waits for ever, and no buffer a peer may
// still read is freed under it (ASan and TSan run this).
class FailingGpt final : public Model {
 public:
  explicit FailingGpt(int rank) : inner_(kConfig, 42), rank_(rank) {}
  ParameterStore& parameters() override { return inner_.parameters(); }
  float forward_backward(std::span<const std::int32_t> tokens,
                         std::span<const std::int32_t> targets, std::size_t sequences,
                         std::size_t seq, bool with_grads, const GradientsReady& ready,
                         float loss_scale) override {
    if (rank_ == 1 && ++calls_ == 2) {
      (void)inner_.forward(tokens, targets, sequences, seq, true);
      throw std::runtime_error("rank 1's model failed");
    }
    return inner_.forward_backward(tokens, targets, sequences, seq, with_grads, ready, loss_scale);
  }

 private:
  testing::GptModel inner_;
  int rank_;
  int calls_ = 0;
};

TEST(Trainer, ZeroThreeEndsEveryRankWhenOneFailsMidStep) {
  const Corpus corpus = Corpus::builtin(16);
  for (int zero : {0, 1, 2, 3}) {
    EXPECT_THAT(error_of([&] {
                  run_local(4, [&](Communicator& comm) {
                    FailingGpt model(comm.rank());
                    ParallelContext context(comm, Mesh({"data"}, {4}));
                    Trainer trainer(context, model, corpus, settings_for(zero));
                    for (int step = 0; step < 4; ++step) (void)trainer.step();
                  });
                }),
                HasSubstr("rank 1's model failed"))
        << "zero " << zero;
  }
}

// Rank 1's backward fails after announcing gradients whose all-reduces are in flight, which
// peers read from its buffers: the trainer waits for them before it lets the failure unwind (and
// the buffers go), and every rank ends with the error (ASan and TSan run this).
class FailingInBackwardGpt final : public Model {
 public:
  explicit FailingInBackwardGpt(int rank) : inner_(kConfig, 42), rank_(rank) {}
  ParameterStore& parameters() override { return inner_.parameters(); }
  float forward_backward(std::span<const std::int32_t> tokens,
                         std::span<const std::int32_t> targets, std::size_t sequences,
                         std::size_t seq, bool with_grads, const GradientsReady& ready,
                         float loss_scale) override {
    int announced = 0;
    const bool fails = rank_ == 1 && ++calls_ == 2;
    return inner_.forward_backward(
        tokens, targets, sequences, seq, with_grads,
        [&](std::size_t begin, std::size_t end) {
          if (ready) ready(begin, end);
          if (fails && ++announced == 2) {
            throw std::runtime_error("rank 1's backward failed");
          }
        },
        loss_scale);
  }

 private:
  testing::GptModel inner_;
  int rank_;
  int calls_ = 0;
};

TEST(Trainer, ABackwardFailingWithReductionsInFlightEndsEveryRank) {
  const Corpus corpus = Corpus::builtin(16);
  for (int zero : {0, 1}) {
    std::vector<std::int64_t> steps_done(4, -1);
    EXPECT_THAT(error_of([&] {
                  run_local(4, [&](Communicator& comm) {
                    FailingInBackwardGpt model(comm.rank());
                    ParallelContext context(comm, Mesh({"data"}, {4}));
                    Trainer trainer(context, model, corpus, settings_for(zero));
                    try {
                      for (int step = 0; step < 4; ++step) (void)trainer.step();
                    } catch (...) {
                      steps_done[static_cast<std::size_t>(comm.rank())] = trainer.steps_done();
                      throw;
                    }
                  });
                }),
                HasSubstr("rank 1's backward failed"))
        << "zero " << zero;
    // The failed second step is not counted, on the rank that failed or on its peers.
    for (std::int64_t done : steps_done) EXPECT_EQ(done, 1) << "zero " << zero;
  }
}

TEST(ParameterStore, UnitsAreRunsOfConsecutiveParameters) {
  const ParameterStore store(models::gpt_parameters(kConfig));
  ASSERT_EQ(store.units().size(), kConfig.n_layer + 2);
  EXPECT_EQ(store.units()[0].name, "embeddings");
  EXPECT_EQ(store.units()[1].name, "h.0");
  EXPECT_EQ(store.units()[1].end - store.units()[1].first, 12U);
  EXPECT_EQ(store.units().back().name, "ln_f");
  std::size_t covered = 0;
  for (const ParameterUnit& unit : store.units()) {
    EXPECT_EQ(unit.offset, covered);
    covered += unit.count;
  }
  EXPECT_EQ(covered, store.parameter_elements());
  EXPECT_THAT(error_of([] {
                ParameterStore split({{"a", {2}, {}, {}, true, "x"},
                                      {"b", {2}, {}, {}, true, "y"},
                                      {"c", {2}, {}, {}, true, "x"}});
              }),
              HasSubstr("parameter 'c' is in unit 'x', whose parameters are not consecutive"));
}

// The bf16 copies the products read: each value rounded to nearest (ties to even), made again
// after the values change, and never read from a unit that is not gathered.
TEST(ParameterStore, ComputeCopiesFollowTheValues) {
  ParameterStore store({{"w", {3}, {}, {}, true, "layer"}, {"b", {2}, {}, {}, false, "layer"}});
  std::span<float> values = store.values();
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even, 1. 1 + 3 x 2^-9 rounds up to 1 + 2^-7.
  const float one_and_a_tie = 1.0F + 0x1p-8F, one_and_more = 1.0F + 3 * 0x1p-9F;
  values[0] = one_and_a_tie;
  values[1] = one_and_more;
  values[2] = -2.5F;
  const BFloat16* w = store.compute_value(0);
  EXPECT_EQ(to_float(w[0]), 1.0F);
  EXPECT_EQ(to_float(w[1]), 1.0F + 0x1p-7F);
  EXPECT_EQ(to_float(w[2]), -2.5F);
  EXPECT_EQ(store.compute_bytes(), store.parameter_elements() * sizeof(BFloat16));
  // Written through the writable buffers: made again.
  store.values()[2] = 3.0F;
  EXPECT_EQ(to_float(store.compute_value(0)[2]), 3.0F);
  // Written through value(index): made again once the store is told.
  store.value(0)[2] = 4.0F;
  EXPECT_EQ(to_float(store.compute_value(0)[2]), 3.0F);
  store.mark_values_changed();
  EXPECT_EQ(to_float(store.compute_value(0)[2]), 4.0F);
  EXPECT_THAT(error_of([&] { (void)store.compute_value(2); }),
              HasSubstr("compute_value: parameter 2 of 2"));
}

// Sharded (ZeRO-3): a unit's copies exist while it is gathered, are made from each gather's
// values, and reading one outside a gather names the parameter.
TEST(ParameterStore, ShardedComputeCopiesLiveWhileTheirUnitIsGathered) {
  const Corpus corpus = Corpus::builtin(16);
  run_local(2, [&](Communicator& comm) {
    testing::GptModel model(kConfig, 7);
    ParallelContext context(comm, Mesh({"fsdp"}, {2}));
    Trainer trainer(context, model, corpus, settings_for(3));
    ParameterStore& store = model.parameters();
    EXPECT_THAT(error_of([&] { (void)store.compute_value(1); }), HasSubstr("is not gathered"));
    std::vector<float> before;
    store.gather(1);
    const std::size_t p = store.units()[1].first;
    before.assign(store.value(p), store.value(p) + store.count(p));
    EXPECT_EQ(to_float(store.compute_value(p)[0]), to_float(to_bfloat16(before[0])));
    EXPECT_GT(store.compute_bytes(), 0U);
    store.release(1);
    EXPECT_EQ(store.compute_bytes(), 0U);
    (void)trainer.step();
    store.gather(1);
    // The step moved the values, and the copy is of the new ones.
    const float now = store.value(p)[0];
    EXPECT_NE(now, before[0]);
    EXPECT_EQ(to_float(store.compute_value(p)[0]), to_float(to_bfloat16(now)));
    store.release(1);
  });
}

// compute_float is compute_value's rounding widened, made again with it.
TEST(ParameterStore, WidenedCopiesAreTheRoundings) {
  ParameterStore store({{"w", {2}, {}, {}, true, "layer"}});
  store.values()[0] = 1.0F + 3 * 0x1p-9F;
  store.values()[1] = 0.1F;
  const float* w = store.compute_float(0);
  EXPECT_EQ(w[0], 1.0F + 0x1p-7F);
  EXPECT_EQ(w[1], to_float(to_bfloat16(0.1F)));
  EXPECT_NE(w[1], 0.1F);
  EXPECT_EQ(store.compute_bytes(), 2 * sizeof(BFloat16) + 2 * sizeof(float));
  store.values()[1] = 2.0F;
  EXPECT_EQ(store.compute_float(0)[1], 2.0F);
}

// ZeRO-3 gathering in bf16: a gathered unit's values are the roundings of the masters, bit for
// bit, the masters in the slices stay float32, and the shard axis carries half of float32's
// gather bytes (the gradients' reduce-scatters unchanged).
TEST(ParameterStore, Bf16GathersHoldTheRoundingsAndMoveHalfTheBytes) {
  const Corpus corpus = Corpus::builtin(16);
  std::vector<float> masters;
  std::int64_t sent[2] = {};
  for (const DType gather : {DType::kF32, DType::kBF16}) {
    run_local(2, [&](Communicator& comm) {
      testing::GptModel model(kConfig, 7);
      ParallelContext context(comm, Mesh({"fsdp"}, {2}));
      TrainSettings settings = settings_for(3);
      settings.gather_dtype = gather;
      Trainer trainer(context, model, corpus, settings);
      ParameterStore& store = model.parameters();
      const std::int64_t before = context.bytes_sent_by_axes()["fsdp"];
      for (std::size_t u = 0; u < store.units().size(); ++u) {
        store.gather(u);
        const ParameterUnit& unit = store.units()[u];
        const std::vector<float> gathered(store.value(unit.first),
                                          store.value(unit.first) + unit.count);
        store.release(u);
        if (gather == DType::kF32) {
          if (comm.rank() == 0) masters.insert(masters.end(), gathered.begin(), gathered.end());
          continue;
        }
        for (std::size_t i = 0; i < unit.count; ++i) {
          ASSERT_EQ(gathered[i], to_float(to_bfloat16(masters[unit.offset + i])))
              << unit.name << " element " << i;
        }
      }
      if (comm.rank() == 0) {
        sent[gather == DType::kBF16] = context.bytes_sent_by_axes()["fsdp"] - before;
      }
      if (gather == DType::kBF16) {
        EXPECT_EQ(trainer.full_parameters(), masters) << "the masters stay float32";
      }
    });
  }
  EXPECT_GT(sent[0], 0);
  EXPECT_EQ(2 * sent[1], sent[0]);
}

// Ranks given different ZeRO-3 gather types move chunks of different types: the runtime refuses
// the mismatched all-gather on every rank, an error rather than a hang or a wrong unit.
TEST(ParameterStore, RanksGatheringInDifferentTypesEndWithAnError) {
  const Corpus corpus = Corpus::builtin(16);
  TrainSettings settings[2] = {settings_for(3), settings_for(3)};
  settings[0].gather_dtype = DType::kBF16;
  settings[1].gather_dtype = DType::kF32;
  const std::vector<std::string> errors =
      first_step_errors(corpus, Mesh({"fsdp"}, {2}), settings, 7);
  for (const std::string& error : errors) EXPECT_THAT(error, HasSubstr(" where rank "));
  RecordProperty("error", errors[0]);
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

// Ranks given different shardings move chunks of different sizes: the runtime refuses the
// mismatched collective on every rank (an error, never a hang or a wrong model).
TEST(Trainer, RanksWithDifferentShardingsEndWithAnError) {
  const Corpus corpus = Corpus::builtin(16);
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kConfig);
  for (int zero : {1, 2, 3}) {
    TrainSettings settings[2] = {settings_for(zero), settings_for(zero)};
    settings[0].shardings = default_shardings(specs, "world", 2);
    settings[1].shardings = fsdp_shardings(specs, FSDPStrategy::splitting_every_parameter("world"),
                                           2, FsdpSplit::kLogicalAxes);
    const std::vector<std::string> errors =
        first_step_errors(corpus, Mesh({"data"}, {2}), settings, 42);
    for (const std::string& error : errors) {
      EXPECT_THAT(error, HasSubstr(" where rank ")) << "zero " << zero;
    }
    RecordProperty("zero_" + std::to_string(zero) + "_error", errors[0]);
  }
}

TEST(Trainer, BadSettingsAreNamed) {
  const Corpus corpus = Corpus::builtin(16);
  EXPECT_THAT(error_of([&] {
                run_local(3, [&](Communicator& comm) {
                  testing::GptModel model(kConfig, 1);
                  ParallelContext context(comm, Mesh({"data"}, {3}));
                  Trainer trainer(context, model, corpus, settings_for(0));
                });
              }),
              HasSubstr("batch 8 does not divide among the 3 data-parallel ranks"));
  EXPECT_THAT(error_of([&] {
                run_local(1, [&](Communicator& comm) {
                  testing::GptModel model(kConfig, 1);
                  ParallelContext context(comm, Mesh({"data"}, {1}));
                  Trainer trainer(context, model, corpus, settings_for(4));
                });
              }),
              HasSubstr("zero 4 is not 0, 1, 2 or 3"));
  TrainSettings in_f16 = settings_for(0);
  in_f16.reduce_dtype = DType::kF16;
  EXPECT_THAT(error_of([&] {
                run_local(1, [&](Communicator& comm) {
                  testing::GptModel model(kConfig, 1);
                  ParallelContext context(comm, Mesh({"data"}, {1}));
                  Trainer trainer(context, model, corpus, in_f16);
                });
              }),
              HasSubstr("reduce_dtype f16 is not fp32 or bf16"));
  // Shardings made for another group size.
  TrainSettings for_four = settings_for(3);
  for_four.shardings = default_shardings(models::gpt_parameters(kConfig), "fsdp", 4);
  EXPECT_THAT(error_of([&] {
                run_local(2, [&](Communicator& comm) {
                  testing::GptModel model(kConfig, 1);
                  ParallelContext context(comm, Mesh({"data"}, {2}));
                  Trainer trainer(context, model, corpus, for_four);
                });
              }),
              HasSubstr("the parameter shardings are for 4 ranks along 'fsdp'; the shard group "
                        "has 2"));
  EXPECT_THAT(error_of([] { (void)Corpus("too short", 16); }),
              HasSubstr("the data has 9 tokens; sequences of 16 tokens need at least 170"));
}

TEST(Corpus, BatchesDependOnStepAndSequenceOnly) {
  const Corpus corpus = Corpus::builtin(8);
  const TokenBatch whole = corpus.batch(Corpus::Split::kTrain, 3, 7, 4, 0, 4, 8);
  const TokenBatch tail = corpus.batch(Corpus::Split::kTrain, 3, 7, 4, 2, 2, 8);
  EXPECT_TRUE(std::equal(tail.tokens.begin(), tail.tokens.end(), whole.tokens.begin() + 16));
  for (std::size_t i = 0; i + 1 < 8; ++i) EXPECT_EQ(whole.targets[i], whole.tokens[i + 1]);
  const TokenBatch other = corpus.batch(Corpus::Split::kTrain, 3, 8, 4, 0, 4, 8);
  EXPECT_NE(other.tokens, whole.tokens);
  // Longer sequences than the data holds are refused, not read past its end.
  const Corpus small(std::string(200, 'a'), 8);
  EXPECT_THAT(error_of([&] { (void)small.batch(Corpus::Split::kValidation, 1, 1, 1, 0, 1, 20); }),
              HasSubstr("sequences of 20 tokens do not fit in the 20 tokens of the held-out data"));
}

}  // namespace
}  // namespace shardwise::train

// TrainingJob and CheckpointManager from the library, as a C++ program drives them (not through
// the command): a job reports its plan, every step and a summary that agree with one another and
// with a job on another layout; settings it cannot run are refused before any rank starts;
// ranks given different settings are refused naming the setting; a manager's save resumes into
// another trainer bit for bit, and `keep` leaves the newest saves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "error_of.hpp"
#include "shardwise/comm/backend_choice.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/training_job.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

const models::GptConfig kConfig{2, 4, 32, 16, 256};

JobSettings settings_on(const char* mesh) {
  JobSettings job;
  job.model = std::make_shared<const models::GptDefinition>(kConfig);
  job.model_given = "a test GPT";
  job.mesh = Mesh::parse(mesh);
  job.training.steps = 6;
  job.training.batch = 8;
  job.training.seq = 16;
  job.training.warmup = 1;
  job.training.learning_rate = 3e-3F;
  job.training.seed = 3;
  job.eval_every = 3;
  return job;
}

class Recorder final : public JobObserver {
 public:
  void started(const JobPlan& plan) override { plans.push_back(plan); }
  void step(const StepReport& report) override { steps.push_back(report); }
  void finished(const JobSummary& summary) override { summaries.push_back(summary); }
  std::vector<JobPlan> plans;
  std::vector<StepReport> steps;
  std::vector<JobSummary> summaries;
};

Recorder run_job(const char* mesh, int zero = 0) {
  JobSettings settings = settings_on(mesh);
  settings.training.zero = zero;
  const TrainingJob job(std::move(settings));
  Recorder recorder;
  job.run(parse_backend("local", "backend"), recorder);
  return recorder;
}

TEST(TrainingJob, ReportsItsPlanEveryStepAndASummaryThatAgree) {
  const Recorder one = run_job("data=1");
  ASSERT_EQ(one.plans.size(), 1U);
  EXPECT_EQ(one.plans[0].ranks, 1);
  EXPECT_EQ(one.plans[0].layers, kConfig.n_layer);
  ASSERT_EQ(one.steps.size(), 6U);
  for (std::size_t s = 0; s < one.steps.size(); ++s) {
    EXPECT_EQ(one.steps[s].step, static_cast<std::int64_t>(s + 1));
    EXPECT_EQ(one.steps[s].val_loss.has_value(), (s + 1) % 3 == 0) << s;
  }
  EXPECT_LT(one.steps.back().loss, one.steps.front().loss - 0.2F);
  ASSERT_EQ(one.summaries.size(), 1U);
  EXPECT_EQ(one.summaries[0].final_loss, one.steps.back().loss);
  EXPECT_EQ(one.summaries[0].steps_run, 6);
  // Another layout of the same job: the same losses step for step, its ranks all reported.
  const Recorder four = run_job("fsdp=2,model=2", 3);
  ASSERT_EQ(four.steps.size(), 6U);
  for (std::size_t s = 0; s < 6; ++s) {
    EXPECT_NEAR(four.steps[s].loss, one.steps[s].loss, 1e-5F * one.steps[s].loss) << s;
  }
  ASSERT_EQ(four.summaries.size(), 1U);
  EXPECT_EQ(four.summaries[0].ranks.size(), 4U);
  EXPECT_EQ(four.plans[0].model_parallel, 2);
}

TEST(TrainingJob, SettingsItCannotRunAreRefusedBeforeAnyRankStarts) {
  JobSettings uneven = settings_on("data=3");
  EXPECT_THAT(error_of([&] { TrainingJob job(std::move(uneven)); }), HasSubstr("8"));
  JobSettings heads = settings_on("model=3");
  EXPECT_THAT(error_of([&] { TrainingJob job(std::move(heads)); }),
              HasSubstr("does not divide the 4 attention heads"));
  JobSettings expert = settings_on("expert=2");
  EXPECT_THAT(error_of([&] { TrainingJob job(std::move(expert)); }),
              HasSubstr("an expert axis of 2 ranks: the model has no experts to split"));
}

// The library speaks of settings: a program is told `sequence_parallel` and `mesh`, a command
// that names its flags (JobSettings::names) is told its flags.
TEST(TrainingJob, ErrorsNameEachSettingAsTheCallerNamesIt) {
  JobSettings plain = settings_on("data=2");
  plain.sequence_parallel = true;
  JobSettings flagged = settings_on("data=2");
  flagged.sequence_parallel = true;
  flagged.names = SettingNames({{"sequence_parallel", "--sequence-parallel"}, {"mesh", "--mesh"}});
  EXPECT_THAT(error_of([&] { TrainingJob job(std::move(plain)); }),
              HasSubstr("sequence_parallel splits the sequence over the model axis; mesh "
                        "Mesh('data': 2) has none"));
  EXPECT_THAT(error_of([&] { TrainingJob job(std::move(flagged)); }),
              HasSubstr("--sequence-parallel splits the sequence over the model axis; --mesh "
                        "Mesh('data': 2) has none"));
  JobSettings late = settings_on("data=1");
  late.eval_every = 7;
  const std::string message = error_of([&] { TrainingJob job(std::move(late)); });
  EXPECT_THAT(message, HasSubstr("eval_every is 7; expected 0 to 6"));
  EXPECT_EQ(message.find("--"), std::string::npos) << message;
}

// Two ranks built with different seeds: the job compares every setting before the first step
// and names the one that differs on every rank, rather than training two models.
TEST(TrainingJob, RanksGivenDifferentSettingsAreRefusedNamingTheSetting) {
  JobSettings first = settings_on("data=2");
  JobSettings second = settings_on("data=2");
  second.training.seed = 4;
  const TrainingJob a(std::move(first));
  const TrainingJob b(std::move(second));
  std::mutex mutex;
  std::vector<std::string> errors;
  EXPECT_ANY_THROW(run_local(2, [&](Communicator& comm) {
    Recorder recorder;
    try {
      (comm.rank() == 0 ? a : b).run_rank(comm, recorder);
    } catch (const std::exception& e) {
      const std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
      throw;
    }
  }));
  ASSERT_EQ(errors.size(), 2U);
  for (const std::string& error : errors) EXPECT_THAT(error, HasSubstr("seed"));
}

// A manager's save, resumed by a manager of another trainer, gives back every value and the
// step; `keep` leaves the newest saves only.
TEST(CheckpointManager, ASaveResumesIntoAnotherTrainerBitForBit) {
  const std::string folder = ::testing::TempDir() + "checkpoint_manager_save";
  std::filesystem::remove_all(folder);
  const auto definition = std::make_shared<const models::GptDefinition>(kConfig);
  const Corpus corpus = Corpus::builtin(16);
  TrainSettings settings = settings_on("data=1").training;
  std::vector<float> saved;
  run_local(1, [&](Communicator& comm) {
    ParallelContext context(comm, Mesh::parse("data=1"));
    DistributedModel model(definition, 5, context, {});
    Trainer trainer(context, model, corpus, settings);
    CheckpointPolicy policy;
    policy.save = folder;
    policy.save_every = 2;
    policy.keep = 2;
    CheckpointManager manager(policy, comm, trainer, checkpointed_model(definition), "{}",
                              [](const std::string&) {});
    EXPECT_EQ(manager.resume(), 0);
    for (std::int64_t step = 1; step <= settings.steps; ++step) {
      (void)trainer.step();
      manager.after_step(step, settings.steps);
    }
    manager.finish();
    const auto values = model.parameters().values();
    saved.assign(values.begin(), values.end());
  });
  std::vector<std::string> kept;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.is_directory()) kept.push_back(entry.path().filename().string());
  }
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"step-00000004", "step-00000006"}));
  run_local(1, [&](Communicator& comm) {
    ParallelContext context(comm, Mesh::parse("data=1"));
    DistributedModel model(definition, 99, context, {});  // other values until resumed
    Trainer trainer(context, model, corpus, settings);
    CheckpointPolicy policy;
    policy.resume = folder;
    CheckpointManager manager(policy, comm, trainer, checkpointed_model(definition), "{}",
                              [](const std::string&) {});
    EXPECT_EQ(manager.resume(), 6);
    const auto values = model.parameters().values();
    EXPECT_TRUE(std::equal(values.begin(), values.end(), saved.begin(), saved.end()));
  });
}

// A parameter's gradient reduction is declared with it; the trainer runs the batch's average
// (data, fsdp) and refuses another rather than averaging over the wrong ranks.
TEST(Trainer, RefusesAGradientReductionItDoesNotRun) {
  const auto definition = std::make_shared<const models::GptDefinition>(kConfig);
  std::vector<ParameterSpec> specs = definition->parameters();
  check_gradient_reductions(specs);  // every family parameter: the batch's average
  specs[1].gradient.averaged_over = {AxisRole::kBatch, AxisRole::kParameterShard,
                                     AxisRole::kBatch};  // a repeat is the same set
  check_gradient_reductions(specs);
  specs[1].gradient.averaged_over = {AxisRole::kBatch};  // as an expert's would be
  EXPECT_THAT(error_of([&] { check_gradient_reductions(specs); }),
              HasSubstr("parameter '" + specs[1].name +
                        "' declares its gradient averaged over data; the trainer averages "
                        "every gradient over data, fsdp"));
  specs[1].gradient.averaged_over = {};
  EXPECT_THAT(error_of([&] { check_gradient_reductions(specs); }), HasSubstr("over no axis"));
}

// The trainer's state blocks carry the store's element type, the checkpoint writes and reads it
// from them, and reading a block as another type is refused rather than reinterpreted.
TEST(Trainer, StateBlocksCarryTheStoresElementType) {
  const auto definition = std::make_shared<const models::GptDefinition>(kConfig);
  const Corpus corpus = Corpus::builtin(16);
  TrainSettings settings = settings_on("fsdp=2").training;
  settings.zero = 3;
  run_local(2, [&](Communicator& comm) {
    ParallelContext context(comm, Mesh::parse("fsdp=2"));
    DistributedModel model(definition, 5, context, {});
    Trainer trainer(context, model, corpus, settings);
    const std::vector<StateBlock> blocks = trainer.state_blocks();
    ASSERT_EQ(blocks.size(), 3 * model.parameters().specs().size());
    std::size_t elements = 0;
    for (const StateBlock& block : blocks) {
      EXPECT_EQ(block.dtype, ParameterStore::kElementType) << block.array;
      EXPECT_EQ(block.bytes().size(), block.elements() * size_in_bytes(block.dtype));
      EXPECT_EQ(block.as<float>().size(), block.elements());
      if (!block.optimizer) elements += block.elements();
    }
    // ZeRO-3: each rank's blocks of the values are its half of the model's.
    EXPECT_EQ(2 * elements, model.parameters().parameter_elements());
    EXPECT_THAT(error_of([&] { (void)blocks.front().as<BFloat16>(); }),
                HasSubstr("holds f32 elements, read as bf16"));
  });
}

}  // namespace
}  // namespace shardwise::train

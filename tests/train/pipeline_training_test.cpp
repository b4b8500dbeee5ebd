// The trainer over a pipeline axis: the GPT's stages under GPipe, 1F1B and interleaved 1F1B,
// alone and with data parallelism and ZeRO 1-2, follow the one-rank run step for step (the
// tied embedding's copies kept equal, the norm counted once).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train {
namespace {

using shardwise::testing::error_of;

const models::GptConfig kConfig{4, 2, 16, 16, 256};
constexpr int kSteps = 10;

std::vector<float> losses_on(const std::string& mesh_text, int zero,
                             std::optional<models::GptPipeline> pipeline,
                             const models::GptConfig& config = kConfig,
                             bool sequence_parallel = false) {
  const Corpus corpus = Corpus::builtin(16);
  TrainSettings settings;
  settings.batch = 8;
  settings.seq = 16;
  settings.steps = kSteps;
  settings.warmup = 2;
  settings.learning_rate = 3e-3F;
  settings.zero = zero;
  settings.seed = 5;
  const Mesh mesh = Mesh::parse(mesh_text);
  std::vector<std::vector<float>> by_rank(static_cast<std::size_t>(mesh.size()));
  run_local(static_cast<int>(mesh.size()), [&](Communicator& comm) {
    ParallelContext context(comm, mesh);
    testing::GptModel model(config, 42, context, std::nullopt, sequence_parallel, pipeline);
    Trainer trainer(context, model, corpus, settings);
    std::vector<float> mine;
    for (int step = 0; step < kSteps; ++step) mine.push_back(trainer.step().loss);
    mine.push_back(trainer.validation_loss(2));
    by_rank[static_cast<std::size_t>(comm.rank())] = std::move(mine);  // each rank its own slot
  });
  // Every stage reports the same (the last stage's) loss: every rank against rank 0, after all
  // have finished.
  for (std::size_t r = 1; r < by_rank.size(); ++r) {
    EXPECT_EQ(by_rank[r].size(), by_rank[0].size()) << mesh_text << " rank " << r;
    for (std::size_t s = 0; s < by_rank[r].size() && s < by_rank[0].size(); ++s) {
      EXPECT_NEAR(by_rank[r][s], by_rank[0][s], 1e-6) << mesh_text << " rank " << r;
    }
  }
  return by_rank[0];
}

TEST(PipelineTraining, EveryScheduleAndLayoutFollowsOneRank) {
  const std::vector<float> one = losses_on("data=1", 0, std::nullopt);
  struct Case {
    const char* mesh;
    int zero;
    ScheduleKind kind;
    std::int64_t microbatches;
    std::int64_t chunks;
  };
  for (const Case& c : {Case{"pipeline=2", 0, ScheduleKind::kOneFOneB, 4, 1},
                        Case{"pipeline=2", 0, ScheduleKind::kGPipe, 2, 1},
                        Case{"pipeline=4", 0, ScheduleKind::kOneFOneB, 8, 1},
                        Case{"pipeline=4", 0, ScheduleKind::kGPipe, 4, 1},
                        Case{"pipeline=2", 0, ScheduleKind::kInterleaved1F1B, 4, 2},
                        Case{"model=2,pipeline=2", 0, ScheduleKind::kOneFOneB, 4, 1},
                        Case{"data=2,pipeline=2", 1, ScheduleKind::kOneFOneB, 2, 1},
                        Case{"fsdp=2,pipeline=2", 2, ScheduleKind::kGPipe, 4, 1},
                        Case{"fsdp=2,pipeline=2", 3, ScheduleKind::kOneFOneB, 4, 1}}) {
    const std::string name =
        std::string(c.mesh) + " ZeRO " + std::to_string(c.zero) + " " + to_string(c.kind);
    const std::vector<float> many =
        losses_on(c.mesh, c.zero, models::GptPipeline{c.kind, c.microbatches, c.chunks, {}});
    ASSERT_EQ(many.size(), one.size()) << name;
    for (std::size_t s = 0; s < one.size(); ++s) {
      EXPECT_NEAR(many[s], one[s], 1e-5 * one[s]) << name << " step " << s + 1;
    }
  }
}

// Interleaved 1F1B on 4 stages (8 model chunks of an 8-layer model), and every axis at once on
// 16 in-process ranks.
TEST(PipelineTraining, InterleavedOnFourStagesAndFourAxesFollowOneRank) {
  const models::GptConfig eight{8, 2, 16, 16, 256};
  const std::vector<float> one = losses_on("data=1", 0, std::nullopt, eight);
  const std::vector<float> interleaved = losses_on(
      "pipeline=4", 0, models::GptPipeline{ScheduleKind::kInterleaved1F1B, 8, 2, {}}, eight);
  const std::vector<float> four_axes =
      losses_on("data=2,fsdp=2,model=2,pipeline=2", 1,
                models::GptPipeline{ScheduleKind::kOneFOneB, 2, 1, {}}, eight, true);
  for (std::size_t s = 0; s < one.size(); ++s) {
    EXPECT_NEAR(interleaved[s], one[s], 1e-5 * one[s]) << "interleaved, step " << s + 1;
    EXPECT_NEAR(four_axes[s], one[s], 1e-5 * one[s]) << "four axes, step " << s + 1;
  }
}

// On a pipeline the gradients-ready hook hears of a stage's layers, once each, in its last
// micro-batch's backward, and never of the tied embedding, whose gradients are final only once
// both stages' copies are summed after the schedule.
TEST(PipelineTraining, GradientsReadyReachesThePipelineButNotTiedParameters) {
  const Mesh mesh = Mesh::parse("pipeline=2");
  const Corpus corpus = Corpus::builtin(16);
  run_local(2, [&](Communicator& comm) {
    ParallelContext context(comm, mesh);
    testing::GptModel model(kConfig, 42, context, std::nullopt, false,
                            models::GptPipeline{ScheduleKind::kOneFOneB, 2, 1, {}});
    ParameterStore& store = model.parameters();
    store.zero_grads();
    const TokenBatch batch = corpus.batch(Corpus::Split::kTrain, 5, 1, 4, 0, 4, 16);
    std::vector<std::pair<std::size_t, std::size_t>> told;
    (void)model.forward_backward(
        batch.tokens, batch.targets, 4, 16, true,
        [&](std::size_t begin, std::size_t end) { told.emplace_back(begin, end); });
    std::vector<bool> covered(store.parameter_elements(), false);
    for (const auto& [begin, end] : told) {
      for (std::size_t i = begin; i < end; ++i) {
        EXPECT_FALSE(covered[i]) << "rank " << comm.rank() << " element " << i << " told twice";
        covered[i] = true;
      }
    }
    // The layers' parameters are told; the tied embedding never is (nor the position
    // embedding, which the GPT announces in one range with it: the trainer reduces both after).
    for (std::size_t p = 0; p < store.specs().size(); ++p) {
      const std::string& name = store.specs()[p].name;
      const bool tied = name == "transformer.wte.weight";
      const bool layer = name.find(".h.") != std::string::npos;
      for (std::size_t i = store.offset(p); i < store.offset(p) + store.count(p); ++i) {
        if (tied) {
          ASSERT_FALSE(covered[i]) << "rank " << comm.rank() << " " << name;
        }
        if (layer) {
          ASSERT_TRUE(covered[i]) << "rank " << comm.rank() << " " << name;
        }
      }
    }
  });
}

// The tags a schedule needs: one per (pass, receiving virtual stage, micro-batch).
TEST(PipelineTraining, TheTagsAScheduleNeeds) {
  EXPECT_EQ(train::pipeline_max_tag(1, 1), 1);
  EXPECT_EQ(train::pipeline_max_tag(8, 16), 255);
  // 4 stages x 2 chunks x 4096 micro-batches pass MPI's guaranteed 32767.
  EXPECT_GT(train::pipeline_max_tag(8, 4096), 32767);
}

TEST(PipelineTraining, UnevenLayerSplitsAndBadSplitsAreNamed) {
  const models::GptPipeline uneven{ScheduleKind::kOneFOneB, 2, 1, {3, 1}};
  EXPECT_EQ(train::virtual_stage_ranges(kConfig.n_layer, uneven, 2),
            (std::vector<models::GptStageRange>{{0, 3}, {3, 4}}));
  const std::vector<float> one = losses_on("data=1", 0, std::nullopt);
  const std::vector<float> many = losses_on("pipeline=2", 0, uneven);
  for (std::size_t s = 0; s < one.size(); ++s) EXPECT_NEAR(many[s], one[s], 1e-5 * one[s]);
  // A layer count the stages do not divide, split by count: 5 layers as 3 + 2.
  const models::GptConfig five{5, 2, 16, 16, 256};
  const std::vector<float> five_one = losses_on("data=1", 0, std::nullopt, five);
  const std::vector<float> five_many =
      losses_on("pipeline=2", 0, models::GptPipeline{ScheduleKind::kOneFOneB, 4, 1, {}}, five);
  for (std::size_t s = 0; s < five_one.size(); ++s) {
    EXPECT_NEAR(five_many[s], five_one[s], 1e-5 * five_one[s]) << "5 layers, step " << s + 1;
  }
  EXPECT_THAT(error_of([] {
                (void)train::virtual_stage_ranges(
                    kConfig.n_layer, models::GptPipeline{ScheduleKind::kOneFOneB, 2, 1, {4, 0}}, 2);
              }),
              ::testing::HasSubstr("a virtual pipeline stage of 0 layers"));
  EXPECT_THAT(error_of([] {
                (void)train::virtual_stage_ranges(
                    kConfig.n_layer, models::GptPipeline{ScheduleKind::kOneFOneB, 2, 1, {}}, 8);
              }),
              ::testing::HasSubstr("4 layers cannot fill 8 virtual pipeline stages"));
}

}  // namespace
}  // namespace shardwise::train

// The planner against shardwise's own trainer: for the trainer's tiny preset and every layout
// the trainer runs (data parallel, ZeRO 1 to 3 over fsdp or data, HSDP), the predicted
// parameter, gradient and optimizer bytes per device equal the trainer's measured ones on every
// rank, and the predicted activations are within 10% of what the GPT allocates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/plan/cost_model.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::plan {
namespace {

const models::GptConfig kTiny{4, 4, 128, 64, 256};

ModelShape tiny_shape() { return shape_of(models::gpt_manifest(kTiny)); }

struct Measured {
  std::size_t params = 0;
  std::size_t grads = 0;
  std::size_t optimizer = 0;
  std::size_t activations = 0;
};

std::vector<Measured> train_one_step(const Layout& layout, std::size_t batch) {
  const Mesh mesh({"data", "fsdp"}, {layout.data, layout.fsdp});
  const int ranks = static_cast<int>(mesh.size());
  const train::Corpus corpus = train::Corpus::builtin(kTiny.block_size);
  train::TrainSettings settings;
  settings.batch = batch;
  settings.seq = kTiny.block_size;
  settings.steps = 1;
  settings.zero = layout.zero;
  std::vector<Measured> measured(static_cast<std::size_t>(ranks));
  run_local(ranks, [&](Communicator& comm) {
    testing::GptModel model(kTiny, 1);
    train::ParallelContext context(comm, mesh);
    train::Trainer trainer(context, model, corpus, settings);
    (void)trainer.step();
    measured[static_cast<std::size_t>(comm.rank())] = {
        trainer.params_bytes(), trainer.grads_bytes(), trainer.optimizer_bytes(),
        model.chunk(0).activation_bytes()};
  });
  return measured;
}

TEST(TrainerAgreement, StateBytesAreExactAndActivationsWithinTenPercent) {
  const ModelShape shape = tiny_shape();
  TrainingSetup setup;
  setup.global_batch = 8;
  setup.seq = static_cast<std::int64_t>(kTiny.block_size);
  setup.precision = Precision::kFp32;
  for (const auto& [data, fsdp, zero] : std::vector<std::tuple<int, int, int>>{{1, 1, 0},
                                                                               {2, 1, 0},
                                                                               {2, 1, 1},
                                                                               {2, 1, 2},
                                                                               {2, 1, 3},
                                                                               {1, 2, 1},
                                                                               {1, 2, 2},
                                                                               {1, 2, 3},
                                                                               {1, 4, 3},
                                                                               {2, 2, 1},
                                                                               {2, 2, 2},
                                                                               {2, 2, 3}}) {
    Layout layout;
    layout.data = data;
    layout.fsdp = fsdp;
    layout.zero = zero;
    setup.micro_batch = setup.global_batch / (data * fsdp);
    const Cluster cluster = Cluster::preset("h100-80gb", data * fsdp, 8);
    const Prediction predicted = evaluate(shape, cluster, setup, layout);
    const std::vector<Measured> measured = train_one_step(layout, 8);
    for (std::size_t r = 0; r < measured.size(); ++r) {
      const std::string where = layout.to_string() + ", rank " + std::to_string(r);
      EXPECT_EQ(static_cast<std::int64_t>(measured[r].params), predicted.memory.params) << where;
      EXPECT_EQ(static_cast<std::int64_t>(measured[r].grads), predicted.memory.grads) << where;
      EXPECT_EQ(static_cast<std::int64_t>(measured[r].optimizer), predicted.memory.optimizer)
          << where;
      const double ratio = static_cast<double>(predicted.memory.activations) /
                           static_cast<double>(measured[r].activations);
      EXPECT_NEAR(ratio, 1.0, 0.10) << where;
      RecordProperty(layout.to_string() + " activations predicted / measured",
                     std::to_string(ratio));
    }
  }
}

}  // namespace
}  // namespace shardwise::plan

namespace shardwise::plan {
namespace {

// A manifest that states its transformer's shape is planned from both the shape (activations)
// and the parameters (state): where they disagree it is refused, naming the field, not planned
// as two models at once.
TEST(ModelShape, AStatedTransformerMustAgreeWithTheParameters) {
  ModelManifest manifest = models::gpt_manifest(kTiny);
  ASSERT_TRUE(manifest.transformer.has_value());
  EXPECT_EQ(shape_of(manifest).transformer, manifest.transformer);
  ModelManifest fewer_layers = manifest;
  fewer_layers.transformer->layers -= 1;
  EXPECT_THAT(testing::error_of([&] { (void)shape_of(fewer_layers); }),
              ::testing::HasSubstr("transformer.layers is 3, but the parameters make it 4"));
  ModelManifest untied = manifest;
  untied.transformer->tied_head = false;
  EXPECT_THAT(testing::error_of([&] { (void)shape_of(untied); }),
              ::testing::HasSubstr("transformer.tied_head"));
}

}  // namespace
}  // namespace shardwise::plan

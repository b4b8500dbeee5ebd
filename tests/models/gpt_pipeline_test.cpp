// The GPT pipelined over ranks by the executor: GPipe, 1F1B and interleaved 1F1B schedules on 2
// and 4 stages give the whole model's loss and gradients (the tied token embedding's split
// between the first and the last stage, summing to the whole's), each stage holding exactly the
// micro-batches its schedule has in flight.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/half.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/scheduled_chunk.hpp"
#include "stage_checks.hpp"

namespace shardwise::models {
namespace {

using shardwise::testing::error_of;
using ::testing::HasSubstr;

struct Case {
  ScheduleKind kind;
  std::int64_t stages;
  std::int64_t chunks;  // per stage
};

TEST(GptPipeline, EverySchedulesGivesTheWholeModelsLossAndGradients) {
  const GptConfig config{4, 2, 16, 8, 37};
  const std::size_t batch = 8, seq = 8, microbatches = 4, per = batch / microbatches;
  const std::vector<std::int32_t> tokens =
      stage_checks::draw_ids(batch * seq, 5, config.vocab_size);
  const std::vector<std::int32_t> targets =
      stage_checks::draw_ids(batch * seq, 6, config.vocab_size);
  train::ParameterStore whole(gpt_parameters(config));
  whole.initialize(13);
  whole.zero_grads();
  testing::GptChunk model(config, whole);
  const float loss = model.forward(tokens, targets, batch, seq);
  model.backward();

  for (const Case& c : {Case{ScheduleKind::kGPipe, 2, 1}, Case{ScheduleKind::kOneFOneB, 2, 1},
                        Case{ScheduleKind::kOneFOneB, 4, 1}, Case{ScheduleKind::kGPipe, 4, 1},
                        Case{ScheduleKind::kInterleaved1F1B, 2, 2}}) {
    const std::string name = to_string(c.kind) + " on " + std::to_string(c.stages) + " stages";
    const PipelineSchedule schedule =
        build_schedule(c.kind, c.stages, static_cast<std::int64_t>(microbatches), c.chunks);
    const std::vector<std::int64_t> expected_in_flight = schedule.peak_in_flight();
    const std::size_t layers_per_chunk =
        config.n_layer / static_cast<std::size_t>(c.stages * c.chunks);
    std::mutex mutex;
    stage_checks::StageGradients gradients(whole);
    double loss_sum = 0;
    run_local(static_cast<int>(c.stages), [&](Communicator& comm) {
      const std::int64_t stage = comm.rank();
      // This rank's chunks: virtual stages chunk * stages + stage, each a run of layers.
      std::vector<GptStageRange> ranges;
      std::vector<train::ParameterSpec> specs;
      for (std::int64_t k = 0; k < c.chunks; ++k) {
        const auto v = static_cast<std::size_t>(schedule.virtual_stage(stage, k));
        ranges.push_back({v * layers_per_chunk, (v + 1) * layers_per_chunk});
        for (auto& spec : gpt_stage_parameters(config, ranges.back())) {
          specs.push_back(std::move(spec));
        }
      }
      train::ParameterStore store(specs);
      store.initialize(13);
      store.zero_grads();
      std::vector<std::unique_ptr<testing::GptChunk>> gpts;
      std::vector<std::unique_ptr<train::ScheduledChunk>> chunks;
      std::vector<train::PipelineChunk*> driven;
      for (const GptStageRange& range : ranges) {
        gpts.push_back(std::make_unique<testing::GptChunk>(config, store, train::TensorParallel(),
                                                           false, range));
        chunks.push_back(
            std::make_unique<train::ScheduledChunk>(gpts.back()->chunk(), tokens, targets, per, seq,
                                                    1.0F / static_cast<float>(microbatches)));
        driven.push_back(chunks.back().get());
      }
      const train::PipelineStepResult result = train::run_pipeline_schedule(schedule, driven, comm);
      std::lock_guard lock(mutex);
      EXPECT_EQ(result.peak_in_flight, expected_in_flight[static_cast<std::size_t>(stage)])
          << name << " stage " << stage;
      EXPECT_EQ(result.timeline.size(), schedule.actions[static_cast<std::size_t>(stage)].size());
      // One chunk keeps exactly the micro-batches in flight; of several, none keeps more.
      for (const auto& chunk : chunks) {
        EXPECT_LE(chunk->slots(), static_cast<std::size_t>(result.peak_in_flight)) << name;
      }
      if (chunks.size() == 1) {
        EXPECT_EQ(chunks[0]->slots(), static_cast<std::size_t>(result.peak_in_flight)) << name;
      }
      loss_sum += result.loss_sum;
      gradients.add(store);
    });
    EXPECT_NEAR(loss_sum / static_cast<double>(microbatches), loss, 1e-6 * loss) << name;
    gradients.expect_whole(name);
  }
}

// A chunk that fails at one pass, on one stage, after passes have gone both ways.
class FailingChunk final : public train::PipelineChunk {
 public:
  FailingChunk(std::size_t boundary, bool fails) : boundary_(boundary), fails_(fails) {}
  [[nodiscard]] std::size_t boundary_elements() const override { return boundary_; }
  float forward(std::int64_t microbatch, std::span<const float>, std::span<float> output) override {
    if (fails_ && microbatch == 2) throw InvalidArgument("stage broke at micro-batch 2");
    std::fill(output.begin(), output.end(), 1.0F);
    return 1.0F;
  }
  void backward(std::int64_t, std::span<const float>, std::span<float> input_grad) override {
    std::fill(input_grad.begin(), input_grad.end(), 1.0F);
  }

 private:
  std::size_t boundary_;
  bool fails_;
};

// A stage that fails mid-step ends every rank with its error: the stages waiting for its
// messages fail at once instead of waiting for a timeout, and its own sends in flight finish
// first (ASan and TSan check no peer reads a freed buffer).
TEST(GptPipeline, AStageThatFailsMidStepEndsEveryRank) {
  for (const ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    const PipelineSchedule schedule = build_schedule(kind, 4, 8);
    const auto started = std::chrono::steady_clock::now();
    const std::string message = error_of([&] {
      run_local(4, [&](Communicator& comm) {
        FailingChunk chunk(1 << 16, comm.rank() == 2);
        std::vector<train::PipelineChunk*> chunks{&chunk};
        (void)train::run_pipeline_schedule(schedule, chunks, comm);
      });
    });
    EXPECT_THAT(message, HasSubstr("rank 2 failed: stage broke at micro-batch 2"))
        << to_string(kind);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  }
}

// A chunk that sends values off bf16's grid and records what it receives.
class RecordingChunk final : public train::PipelineChunk {
 public:
  explicit RecordingChunk(std::size_t boundary) : boundary_(boundary) {}
  [[nodiscard]] std::size_t boundary_elements() const override { return boundary_; }
  float forward(std::int64_t, std::span<const float> input, std::span<float> output) override {
    received.insert(received.end(), input.begin(), input.end());
    for (std::size_t i = 0; i < output.size(); ++i) output[i] = sent(i);
    return 0.0F;
  }
  void backward(std::int64_t, std::span<const float> output_grad,
                std::span<float> input_grad) override {
    received.insert(received.end(), output_grad.begin(), output_grad.end());
    for (std::size_t i = 0; i < input_grad.size(); ++i) input_grad[i] = sent(i);
  }
  [[nodiscard]] static float sent(std::size_t i) {
    return 1.0F + 0x1p-12F + 0.001F * static_cast<float>(i);
  }
  std::vector<float> received;

 private:
  std::size_t boundary_;
};

// Messages between stages in bf16: each arrives as the rounding of what was sent, both ways,
// and the pipeline axis carries half of float32's bytes.
TEST(GptPipeline, Bf16MessagesArriveRoundedAndMoveHalfTheBytes) {
  const PipelineSchedule schedule = build_schedule(ScheduleKind::kOneFOneB, 2, 2);
  std::int64_t sent[2] = {};
  for (const DType message : {DType::kF32, DType::kBF16}) {
    run_local(2, [&](Communicator& comm) {
      RecordingChunk chunk(64);
      std::vector<train::PipelineChunk*> chunks{&chunk};
      const std::int64_t before = comm.counters().for_axes("pipeline").sent;
      (void)train::run_pipeline_schedule(schedule, chunks, comm, false, message);
      // Each stage received one message a micro-batch: activations on stage 1, gradients on 0.
      ASSERT_EQ(chunk.received.size(), 2U * 64U);
      for (std::size_t i = 0; i < chunk.received.size(); ++i) {
        const float expected = RecordingChunk::sent(i % 64);
        EXPECT_EQ(chunk.received[i],
                  message == DType::kBF16 ? to_float(to_bfloat16(expected)) : expected);
      }
      if (comm.rank() == 0) {
        sent[message == DType::kBF16] = comm.counters().for_axes("pipeline").sent - before;
      }
    });
  }
  EXPECT_GT(sent[0], 0);
  EXPECT_EQ(2 * sent[1], sent[0]);
}

// Stages that disagree on the messages' type end with an error on both, never a hang or a
// message read as the other type; a type neither float32 nor bf16 is refused before any message.
TEST(GptPipeline, StagesDisagreeingOnTheMessagesTypeEndWithAnError) {
  const PipelineSchedule schedule = build_schedule(ScheduleKind::kOneFOneB, 2, 2);
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      RecordingChunk chunk(64);
      std::vector<train::PipelineChunk*> chunks{&chunk};
      (void)train::run_pipeline_schedule(schedule, chunks, comm, false,
                                         comm.rank() == 0 ? DType::kBF16 : DType::kF32);
    });
  });
  EXPECT_THAT(message, HasSubstr(" bytes but rank "));
  RecordProperty("error", message);
  run_local(1, [&](Communicator& comm) {
    const PipelineSchedule one = build_schedule(ScheduleKind::kOneFOneB, 1, 1);
    RecordingChunk chunk(4);
    std::vector<train::PipelineChunk*> chunks{&chunk};
    EXPECT_THAT(error_of([&] {
                  (void)train::run_pipeline_schedule(one, chunks, comm, false, DType::kF16);
                }),
                HasSubstr("pipeline messages in f16: float32 or bf16"));
  });
}

TEST(GptPipeline, AScheduleForAnotherPipelineIsRefused) {
  const PipelineSchedule schedule = build_schedule(ScheduleKind::kOneFOneB, 2, 2);
  run_local(1, [&](Communicator& comm) {
    std::vector<train::PipelineChunk*> none(1, nullptr);
    EXPECT_THAT(error_of([&] { (void)train::run_pipeline_schedule(schedule, none, comm); }),
                HasSubstr("a schedule of 2 stages on a pipeline of 1 ranks"));
  });
  run_local(2, [&](Communicator& comm) {
    std::vector<train::PipelineChunk*> two(2, nullptr);
    EXPECT_THAT(error_of([&] { (void)train::run_pipeline_schedule(schedule, two, comm); }),
                HasSubstr("a schedule of 1 model chunks per stage given 2"));
  });
}

}  // namespace
}  // namespace shardwise::models

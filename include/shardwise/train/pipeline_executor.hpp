#pragma once
// Pipeline parallelism's executor: walks one stage's list of actions of any schedule the
// strategies layer builds (GPipe, 1F1B, interleaved 1F1B: a new schedule is a new table, not new
// code here), running each model chunk's forward or backward of a micro-batch and moving
// activations and their gradients between neighbouring virtual stages with point-to-point
// messages along the pipeline axis. Sends are nonblocking (their data is copied when they
// start); a pass waits only for the one message it needs.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/train/boundary_element.hpp"

namespace shardwise::train {

// One model chunk as the executor drives it (virtual stage chunk * stages + stage of the
// schedule). Between chunks pass boundary_elements() BoundaryElements per micro-batch.
class PipelineChunk {
 public:
  virtual ~PipelineChunk() = default;
  [[nodiscard]] virtual std::size_t boundary_elements() const = 0;
  // The forward of `microbatch`: `input` is empty for the first virtual stage, `output` for the
  // last, which returns the micro-batch's loss (the others return 0). What backward needs is
  // kept by the chunk until then.
  virtual float forward(std::int64_t microbatch, std::span<const BoundaryElement> input,
                        std::span<BoundaryElement> output) = 0;
  // Its backward: `output_grad` is empty for the last virtual stage, `input_grad` for the first.
  virtual void backward(std::int64_t microbatch, std::span<const BoundaryElement> output_grad,
                        std::span<BoundaryElement> input_grad) = 0;
};

struct ExecutedAction {
  PipelineAction action;
  // Seconds since the schedule began (every stage of the pipeline begins together): when the
  // pass had its message and started computing, and when it finished.
  double start = 0;
  double end = 0;
};

struct PipelineStepResult {
  // The sum of the last virtual stage's micro-batch losses (0 on ranks without it).
  double loss_sum = 0;
  // Every action as it ran, in order.
  std::vector<ExecutedAction> timeline;
  // The most micro-batch chunks forwarded and not yet backwarded at once.
  std::int64_t peak_in_flight = 0;

  // Seconds spent computing, and from the start to the last pass's end.
  [[nodiscard]] double busy_seconds() const;
  [[nodiscard]] double elapsed_seconds() const;
};

// The largest message tag a schedule of `virtual_stages` virtual stages in all (stages x model
// chunks) and `microbatches` micro-batches uses: (virtual_stages x microbatches) x 2 - 1. A
// backend must take it (Communicator::max_tag; MPI guarantees only 32767).
[[nodiscard]] std::int64_t pipeline_max_tag(std::int64_t virtual_stages, std::int64_t microbatches);

// Runs the actions of stage `pipeline.rank()` of `schedule` (which must have pipeline.size()
// stages and chunks.size() virtual stages: an InvalidArgument otherwise). Messages go to the
// members of `pipeline` that run the neighbouring virtual stages (stage s is member s), counted
// under "pipeline" in its byte counters. A failing pass throws after this rank's sends in flight
// have finished, so no peer reads a freed buffer. InvalidArgument where the schedule needs tags
// past pipeline.max_tag().
// With align_clocks, every stage starts its clock together (a barrier first), so that the
// timelines of a step line up for a drawing; without, each stage's clock starts when it does.
// Activations and their gradients travel in `message`: float32, or bf16 (rounded as they are
// sent and widened as they arrive: half the bytes, as Megatron-LM's bf16 stages send them).
PipelineStepResult run_pipeline_schedule(const PipelineSchedule& schedule,
                                         std::span<PipelineChunk* const> chunks,
                                         Communicator& pipeline, bool align_clocks = true,
                                         DType message = DType::kF32);

}  // namespace shardwise::train

#include "shardwise/train/pipeline_executor.hpp"
#include "shardwise/core/element_type.hpp"

#include <chrono>
#include <climits>
#include <map>
#include <utility>

#include "shardwise/comm/group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"

namespace shardwise::train {
namespace {

using Clock = std::chrono::steady_clock;

// Tags are unique per (pass, receiving virtual stage, micro-batch), so messages between two
// ranks match whatever order the schedule consumes them in.
int tag_of(Pass pass, std::int64_t virtual_stage, std::int64_t microbatch,
           std::int64_t microbatches) {
  return static_cast<int>((virtual_stage * microbatches + microbatch) * 2 +
                          (pass == Pass::kBackward ? 1 : 0));
}

}  // namespace

std::int64_t pipeline_max_tag(std::int64_t virtual_stages, std::int64_t microbatches) {
  return virtual_stages * microbatches * 2 - 1;
}

double PipelineStepResult::busy_seconds() const {
  double busy = 0;
  for (const ExecutedAction& executed : timeline) busy += executed.end - executed.start;
  return busy;
}

double PipelineStepResult::elapsed_seconds() const {
  return timeline.empty() ? 0 : timeline.back().end;
}

PipelineStepResult run_pipeline_schedule(const PipelineSchedule& schedule,
                                         std::span<PipelineChunk* const> chunks,
                                         Communicator& pipeline, bool align_clocks, DType message) {
  const std::int64_t stages = schedule.num_stages;
  const std::int64_t microbatches = schedule.num_microbatches;
  const std::int64_t virtual_stages = stages * schedule.virtual_stages;
  if (pipeline.size() != stages) {
    throw InvalidArgument("a schedule of " + std::to_string(stages) + " stages on a pipeline of " +
                          std::to_string(pipeline.size()) + " ranks");
  }
  if (static_cast<std::int64_t>(chunks.size()) != schedule.virtual_stages) {
    throw InvalidArgument("a schedule of " + std::to_string(schedule.virtual_stages) +
                          " model chunks per stage given " + std::to_string(chunks.size()));
  }
  if (pipeline_max_tag(virtual_stages, microbatches) > pipeline.max_tag()) {
    throw InvalidArgument(std::to_string(virtual_stages) + " virtual stages x " +
                          std::to_string(microbatches) + " micro-batches need message tags up to " +
                          std::to_string(pipeline_max_tag(virtual_stages, microbatches)) +
                          "; the " + pipeline.backend() + " backend takes tags up to " +
                          std::to_string(pipeline.max_tag()));
  }
  const std::int64_t stage = pipeline.rank();
  const auto rank_of = [&](std::int64_t virtual_stage) {
    return static_cast<Rank>(virtual_stage % stages);
  };
  SendRecvOptions options;
  options.axes = "pipeline";
  // Every stage starts its clock together, so the timelines of a step line up.
  if (stages > 1 && align_clocks)
    pipeline.barrier(world_group(pipeline.size()).relabeled("pipeline"));
  const auto start = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  if (message != DType::kF32 && message != DType::kBF16) {
    throw InvalidArgument("pipeline messages in " + to_string(message) + ": float32 or bf16");
  }
  // A message's elements as they travel: bf16 ones rounded on the way out, widened on arrival.
  std::vector<BFloat16> rounded;
  const auto start_send = [&](std::span<const BoundaryElement> values, Rank to) {
    if (message == DType::kBF16) {
      rounded.resize(values.size());
      kernels::to_bf16(values, rounded);
      return pipeline.isend(rounded.data(), rounded.size(), DType::kBF16, to, options);
    }
    return pipeline.isend(values.data(), values.size(), element_type(values.data()), to, options);
  };
  const auto receive = [&](std::span<BoundaryElement> values, Rank from) {
    if (message == DType::kBF16) {
      rounded.resize(values.size());
      pipeline.recv(rounded.data(), rounded.size(), DType::kBF16, from, options);
      kernels::to_float(rounded, values);
      return;
    }
    pipeline.recv(values.data(), values.size(), element_type(values.data()), from, options);
  };
  PipelineStepResult result;
  std::vector<Work> sends;
  std::int64_t in_flight = 0;
  try {
    for (const PipelineAction& action : schedule.actions[static_cast<std::size_t>(stage)]) {
      PipelineChunk& chunk = *chunks[static_cast<std::size_t>(action.chunk)];
      const std::int64_t v = schedule.virtual_stage(stage, action.chunk);
      const std::size_t boundary = chunk.boundary_elements();
      ExecutedAction executed{action, 0, 0};
      if (action.pass == Pass::kForward) {
        std::vector<BoundaryElement> input(v > 0 ? boundary : 0);
        if (v > 0) {
          options.tag = tag_of(Pass::kForward, v, action.microbatch, microbatches);
          receive(input, rank_of(v - 1));
        }
        executed.start = seconds();
        std::vector<BoundaryElement> output(v + 1 < virtual_stages ? boundary : 0);
        result.loss_sum += chunk.forward(action.microbatch, input, output);
        if (v + 1 < virtual_stages) {
          options.tag = tag_of(Pass::kForward, v + 1, action.microbatch, microbatches);
          sends.push_back(start_send(output, rank_of(v + 1)));
        }
        result.peak_in_flight = std::max(result.peak_in_flight, ++in_flight);
      } else {
        std::vector<BoundaryElement> output_grad(v + 1 < virtual_stages ? boundary : 0);
        if (v + 1 < virtual_stages) {
          options.tag = tag_of(Pass::kBackward, v, action.microbatch, microbatches);
          receive(output_grad, rank_of(v + 1));
        }
        executed.start = seconds();
        std::vector<BoundaryElement> input_grad(v > 0 ? boundary : 0);
        chunk.backward(action.microbatch, output_grad, input_grad);
        if (v > 0) {
          options.tag = tag_of(Pass::kBackward, v - 1, action.microbatch, microbatches);
          sends.push_back(start_send(input_grad, rank_of(v - 1)));
        }
        --in_flight;
      }
      executed.end = seconds();
      result.timeline.push_back(executed);
    }
  } catch (...) {
    for (Work& send : sends) {
      try {
        send.wait();
      } catch (...) {  // the failure that matters is being thrown already
      }
    }
    throw;
  }
  for (Work& send : sends) send.wait();
  return result;
}

}  // namespace shardwise::train

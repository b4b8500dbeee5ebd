#pragma once
// A model chunk as the pipeline executor drives it: micro-batch m's tokens and targets cut from
// a rank's sequences, its activations kept in a slot from its forward to its backward, so that
// a chunk holds exactly the micro-batches the schedule has in flight (1F1B: at most
// stages - stage; GPipe: all of them).

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "shardwise/train/boundary_element.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/pipeline_executor.hpp"

namespace shardwise::train {

class ScheduledChunk final : public PipelineChunk {
 public:
  // Micro-batch m is sequences [m * sequences, (m + 1) * sequences) of `tokens` and `targets`
  // (rows of `seq`); the last chunk's loss is weighted by `loss_scale` in backward
  // (1 / micro-batches: the step's loss is their mean).
  // `ready` hears of final gradients in the backward of micro-batch `last_backward` (the
  // chunk's last in the schedule), so that their reduction overlaps what backward is left.
  ScheduledChunk(ModelChunk& chunk, std::span<const std::int32_t> tokens,
                 std::span<const std::int32_t> targets, std::size_t sequences, std::size_t seq,
                 float loss_scale, GradientsReady ready = {}, std::int64_t last_backward = -1);

  [[nodiscard]] std::size_t boundary_elements() const override;
  float forward(std::int64_t microbatch, std::span<const BoundaryElement> input,
                std::span<BoundaryElement> output) override;
  void backward(std::int64_t microbatch, std::span<const BoundaryElement> output_grad,
                std::span<BoundaryElement> input_grad) override;

  // Activation slots the chunk has used: the most micro-batches it held at once.
  [[nodiscard]] std::size_t slots() const { return slots_; }

 private:
  ModelChunk& chunk_;
  std::span<const std::int32_t> tokens_;
  std::span<const std::int32_t> targets_;
  std::size_t sequences_;
  std::size_t seq_;
  float loss_scale_;
  GradientsReady ready_;
  std::int64_t last_backward_;
  std::map<std::int64_t, std::size_t> slot_of_;  // micro-batches in flight
  std::vector<std::size_t> free_;
  std::size_t slots_ = 0;
};

}  // namespace shardwise::train

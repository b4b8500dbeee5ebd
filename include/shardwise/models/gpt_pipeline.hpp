#pragma once
// The GPT's stages as the pipeline executor drives them: a Gpt of a range of layers, given each
// micro-batch's tokens and targets, keeping a micro-batch's activations in a slot from its
// forward to its backward, so a stage holds exactly the micro-batches the schedule has in
// flight (1F1B: at most stages - stage; GPipe: all of them).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "shardwise/models/gpt.hpp"
#include "shardwise/train/pipeline_executor.hpp"

namespace shardwise::models {

// Micro-batch m's tokens and targets, (sequences, seq) each.
using MicrobatchData =
    std::function<std::pair<std::span<const std::int32_t>, std::span<const std::int32_t>>(
        std::int64_t m)>;

class GptPipelineChunk final : public train::PipelineChunk {
 public:
  // Micro-batches of `sequences` x `seq` tokens; the last stage's loss is weighted by
  // `loss_scale` in backward (1 / micro-batches: the step's loss is their mean).
  GptPipelineChunk(Gpt& gpt, std::size_t sequences, std::size_t seq, float loss_scale,
                   MicrobatchData data);

  [[nodiscard]] std::size_t boundary_elements() const override;
  float forward(std::int64_t microbatch, std::span<const float> input,
                std::span<float> output) override;
  void backward(std::int64_t microbatch, std::span<const float> output_grad,
                std::span<float> input_grad) override;

  // Activation slots the chunk has used: the most micro-batches it held at once.
  [[nodiscard]] std::size_t slots() const { return slots_; }

 private:
  Gpt& gpt_;
  std::size_t sequences_;
  std::size_t seq_;
  float loss_scale_;
  MicrobatchData data_;
  std::map<std::int64_t, std::size_t> slot_of_;  // micro-batches in flight
  std::vector<std::size_t> free_;
  std::size_t slots_ = 0;
};

}  // namespace shardwise::models

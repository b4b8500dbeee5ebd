#include "shardwise/models/gpt_pipeline.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::models {

GptPipelineChunk::GptPipelineChunk(Gpt& gpt, std::size_t sequences, std::size_t seq,
                                   float loss_scale, MicrobatchData data)
    : gpt_(gpt),
      sequences_(sequences),
      seq_(seq),
      loss_scale_(loss_scale),
      data_(std::move(data)) {}

std::size_t GptPipelineChunk::boundary_elements() const {
  return gpt_.boundary_elements(sequences_, seq_);
}

float GptPipelineChunk::forward(std::int64_t microbatch, std::span<const float> input,
                                std::span<float> output) {
  if (slot_of_.count(microbatch) != 0) {
    throw InvalidArgument("micro-batch " + std::to_string(microbatch) +
                          " forwarded twice without its backward");
  }
  std::size_t slot = slots_;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    ++slots_;
  }
  slot_of_[microbatch] = slot;
  const auto [tokens, targets] = data_(microbatch);
  return gpt_.forward_stage(slot, tokens, targets, sequences_, seq_, input, output);
}

void GptPipelineChunk::backward(std::int64_t microbatch, std::span<const float> output_grad,
                                std::span<float> input_grad) {
  const auto it = slot_of_.find(microbatch);
  if (it == slot_of_.end()) {
    throw InvalidArgument("backward of micro-batch " + std::to_string(microbatch) +
                          " before its forward");
  }
  gpt_.backward_stage(it->second, output_grad, input_grad, loss_scale_);
  free_.push_back(it->second);
  slot_of_.erase(it);
}

}  // namespace shardwise::models

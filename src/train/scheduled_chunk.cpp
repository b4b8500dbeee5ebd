#include "shardwise/train/scheduled_chunk.hpp"

#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::train {

ScheduledChunk::ScheduledChunk(ModelChunk& chunk, std::span<const std::int32_t> tokens,
                               std::span<const std::int32_t> targets, std::size_t sequences,
                               std::size_t seq, float loss_scale, GradientsReady ready,
                               std::int64_t last_backward)
    : chunk_(chunk),
      tokens_(tokens),
      targets_(targets),
      sequences_(sequences),
      seq_(seq),
      loss_scale_(loss_scale),
      ready_(std::move(ready)),
      last_backward_(last_backward) {}

std::size_t ScheduledChunk::boundary_elements() const {
  return chunk_.boundary_elements(sequences_, seq_);
}

float ScheduledChunk::forward(std::int64_t microbatch, std::span<const BoundaryElement> input,
                              std::span<BoundaryElement> output) {
  if (slot_of_.count(microbatch) != 0) {
    throw InvalidArgument("micro-batch " + std::to_string(microbatch) +
                          " forwarded twice without its backward");
  }
  const std::size_t rows = sequences_ * seq_;
  const auto at = static_cast<std::size_t>(microbatch) * rows;
  if (microbatch < 0 || at + rows > tokens_.size() || at + rows > targets_.size()) {
    throw InvalidArgument("micro-batch " + std::to_string(microbatch) + " lies outside the " +
                          std::to_string(tokens_.size()) + " tokens given");
  }
  std::size_t slot = slots_;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    ++slots_;
  }
  slot_of_[microbatch] = slot;
  return chunk_.forward(slot, tokens_.subspan(at, rows), targets_.subspan(at, rows), sequences_,
                        seq_, input, output, false);
}

void ScheduledChunk::backward(std::int64_t microbatch, std::span<const BoundaryElement> output_grad,
                              std::span<BoundaryElement> input_grad) {
  const auto it = slot_of_.find(microbatch);
  if (it == slot_of_.end()) {
    throw InvalidArgument("backward of micro-batch " + std::to_string(microbatch) +
                          " before its forward");
  }
  chunk_.backward(it->second, output_grad, input_grad, loss_scale_,
                  microbatch == last_backward_ ? ready_ : GradientsReady());
  free_.push_back(it->second);
  slot_of_.erase(it);
}

}  // namespace shardwise::train

#pragma once
// A model's loss on held data, as `shardwise ckpt loss` reports it and transformers computes it:
// over windows of a token stream, or over the counted tokens of fine-tuning examples. One rank,
// forward only.

#include <cstddef>
#include <cstdint>
#include <span>

#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/example_set.hpp"

namespace shardwise::train {

struct WindowLoss {
  double loss = 0;  // the mean over every predicted token
  std::size_t windows = 0;
};

// Windows of `seq` tokens one after the other, each predicting the tokens one place on: as many
// as `tokens` holds whole (at least one: InvalidArgument where it has fewer than seq + 1).
[[nodiscard]] WindowLoss window_loss(DistributedModel& model, std::span<const std::int32_t> tokens,
                                     std::size_t seq);

struct ExampleLoss {
  double loss = 0;           // the mean over the counted tokens
  std::size_t examples = 0;  // those with a counted token within seq + 1 of their start
  std::size_t counted = 0;
};

// Each example one sequence cut to `seq` positions, its loss over its counted tokens
// (completions, assistants' turns): what transformers' loss gives with the other labels -100.
// InvalidArgument where no example has a counted token within seq + 1 tokens of its start.
[[nodiscard]] ExampleLoss example_loss(DistributedModel& model, const ExampleSet& examples,
                                       std::size_t seq);

}  // namespace shardwise::train

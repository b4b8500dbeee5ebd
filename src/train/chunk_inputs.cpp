#include "shardwise/train/chunk_inputs.hpp"

#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/cross_entropy.hpp"

namespace shardwise::train {

void check_chunk_batch(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                       std::size_t batch, std::size_t seq, const ChunkLimits& limits) {
  if (batch < 1 || seq < 1 || seq > limits.context_length) {
    throw InvalidArgument("a batch of " + std::to_string(batch) + " sequences of " +
                          std::to_string(seq) + " tokens; expected at least one sequence of 1 to " +
                          std::to_string(limits.context_length) + " tokens");
  }
  // The first chunk embeds the tokens, the last predicts the targets: each checks its own.
  const bool needs_tokens = limits.range.has_first();
  const bool needs_targets = limits.range.has_last(limits.layers);
  if ((needs_tokens && tokens.size() != batch * seq) ||
      (needs_targets && targets.size() != batch * seq)) {
    throw InvalidArgument("tokens and targets need " + std::to_string(batch * seq) +
                          " entries each, got " + std::to_string(tokens.size()) + " and " +
                          std::to_string(targets.size()));
  }
  // A target may be kIgnoredTarget: a position the loss does not count.
  const auto check_ids = [&](std::span<const std::int32_t> ids, bool may_be_ignored) {
    for (std::int32_t id : ids) {
      if ((id < 0 || static_cast<std::size_t>(id) >= limits.vocab_size) &&
          !(may_be_ignored && id == kernels::kIgnoredTarget)) {
        throw InvalidArgument("token " + std::to_string(id) + " is outside the vocabulary 0.." +
                              std::to_string(limits.vocab_size - 1));
      }
    }
  };
  if (needs_tokens) check_ids(tokens, false);
  if (needs_targets) check_ids(targets, true);
  if (seq % static_cast<std::size_t>(limits.sequence_split) != 0) {
    throw InvalidArgument("sequence parallelism splits each sequence over the " +
                          std::to_string(limits.sequence_split) + " model ranks; " +
                          std::to_string(seq) + " tokens do not divide among them");
  }
}

void check_chunk_forward_boundary(std::size_t input, std::size_t output, std::size_t boundary,
                                  const ChunkLimits& limits) {
  if ((!limits.range.has_first() && input != boundary) ||
      (!limits.range.has_last(limits.layers) && output != boundary)) {
    throw InvalidArgument("a stage's input and output hold " + std::to_string(boundary) +
                          " floats of the residual stream; got " + std::to_string(input) + " and " +
                          std::to_string(output));
  }
}

void check_chunk_backward_boundary(std::size_t output_grad, std::size_t input_grad,
                                   std::size_t boundary, const ChunkLimits& limits) {
  if ((!limits.range.has_last(limits.layers) && output_grad != boundary) ||
      (!limits.range.has_first() && input_grad != boundary)) {
    throw InvalidArgument("a stage's output and input gradients hold " + std::to_string(boundary) +
                          " floats of the residual stream; got " + std::to_string(output_grad) +
                          " and " + std::to_string(input_grad));
  }
}

}  // namespace shardwise::train

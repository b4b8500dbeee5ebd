#include "shardwise/train/loss_evaluation.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/cross_entropy.hpp"

namespace shardwise::train {

WindowLoss window_loss(DistributedModel& model, std::span<const std::int32_t> tokens,
                       std::size_t seq) {
  if (seq == 0 || tokens.size() < seq + 1) {
    throw InvalidArgument("the data has " + std::to_string(tokens.size()) +
                          " tokens; a window of " + std::to_string(seq) + " needs " +
                          std::to_string(seq + 1));
  }
  WindowLoss result;
  result.windows = (tokens.size() - 1) / seq;
  double sum = 0;
  for (std::size_t w = 0; w < result.windows; ++w) {
    sum += model.forward_backward(tokens.subspan(w * seq, seq), tokens.subspan(w * seq + 1, seq), 1,
                                  seq, false);
  }
  result.loss = sum / static_cast<double>(result.windows);
  return result;
}

ExampleLoss example_loss(DistributedModel& model, const ExampleSet& examples, std::size_t seq) {
  ExampleLoss result;
  double sum = 0, auxiliary_sum = 0;
  std::vector<std::int32_t> targets;
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const std::span<const std::int32_t> ids = examples.tokens(e);
    const std::span<const std::uint8_t> counted = examples.counted(e);
    if (ids.size() < 2) continue;  // nothing predicted
    const std::size_t positions = std::min(ids.size(), seq + 1) - 1;
    targets.assign(positions, kernels::kIgnoredTarget);
    std::size_t here = 0;
    for (std::size_t t = 0; t < positions; ++t) {
      if (counted[t + 1] != 0) {
        targets[t] = ids[t + 1];
        ++here;
      }
    }
    if (here == 0) continue;
    // The model's mean over the positions, back to the sum over the counted ones; an auxiliary
    // loss (a Mixture of Experts') is one per example, as transformers adds it to each forward.
    const float loss = model.forward_backward(ids.first(positions), targets, 1, positions, false);
    const float auxiliary = model.auxiliary_loss();
    sum += static_cast<double>(loss - auxiliary) * static_cast<double>(positions);
    auxiliary_sum += auxiliary;
    result.counted += here;
    ++result.examples;
  }
  if (result.counted == 0) {
    throw InvalidArgument(
        "the data has no counted token (a completion, an assistant's turn) within " +
        std::to_string(seq + 1) + " tokens of an example's start");
  }
  result.loss = sum / static_cast<double>(result.counted) +
                auxiliary_sum / static_cast<double>(result.examples);
  return result;
}

}  // namespace shardwise::train

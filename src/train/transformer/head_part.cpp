#include "head_part.hpp"

#include <algorithm>
#include <vector>

namespace shardwise::train::transformer {

void HeadPart::forward(float* losses, float* normed, float* statistics, const float* inp,
                       const std::int32_t* targets, float* logits, float* probabilities,
                       std::size_t block, const ParameterView& norm, const ParameterView& head,
                       const Rows& rows) const {
  const std::size_t C = axis_.hidden(), BT = rows.whole;
  norm_.forward(normed, statistics, inp, norm, rows);
  for (std::size_t r0 = 0; r0 < BT; r0 += block) {
    const std::size_t n = std::min(block, BT - r0);
    axis_.products().forward(logits, normed + r0 * C, head, 0, nullptr, n, C, vocab_local_);
    axis_.tp().cross_entropy_forward(losses + r0, probabilities, logits, targets + r0, n,
                                     vocab_local_, vocab_start_);
  }
}

void HeadPart::backward(float* dinp, float* dnormed, float loss_scale, const float* inp,
                        const float* normed, const float* statistics, const std::int32_t* targets,
                        float* logits, float* probabilities, std::size_t block,
                        const ParameterView& norm, const ParameterView& head,
                        const Rows& rows) const {
  const std::size_t C = axis_.hidden(), BT = rows.whole;
  // Every row's loss counts loss_scale / BT. A block of rows at a time, its logits and
  // probabilities computed again (the values of forward), then their gradient through the head.
  const std::vector<float> dlosses(block, loss_scale / static_cast<float>(BT));
  std::vector<float> losses(block);
  for (std::size_t r0 = 0; r0 < BT; r0 += block) {
    const std::size_t n = std::min(block, BT - r0);
    const float* x = normed + r0 * C;
    axis_.products().forward(logits, x, head, 0, nullptr, n, C, vocab_local_);
    axis_.tp().cross_entropy_forward(losses.data(), probabilities, logits, targets + r0, n,
                                     vocab_local_, vocab_start_);
    // The logits are read for the last time above: their gradient is written over them.
    std::fill(logits, logits + n * vocab_local_, 0.0F);
    axis_.tp().cross_entropy_backward(logits, dlosses.data(), probabilities, targets + r0, n,
                                      vocab_local_, vocab_start_);
    // Each block writes its own rows of the input's gradient.
    axis_.products().backward(dnormed + r0 * C, head.grad(0), nullptr, logits, x, head, 0, n, C,
                              vocab_local_, kernels::InputGradient::kOverwrite);
  }
  const float* dnormed_local = axis_.column_input_grad(dnormed, rows);
  std::fill(dinp, dinp + rows.local * C, 0.0F);
  norm_.backward(dinp, dnormed_local, inp, statistics, norm, rows);
}

}  // namespace shardwise::train::transformer

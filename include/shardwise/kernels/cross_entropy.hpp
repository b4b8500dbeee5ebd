#pragma once
// The softmax of each row of logits and its cross-entropy against the target, fused. `logits`
// and `probs` are (rows, vocab); `losses` gets one loss per row. Backward adds
// (probs - onehot(target)) * dlosses[row] into dlogits (dlosses: 1 / rows for a mean loss).
// A row whose target is kIgnoredTarget (a prompt's token in fine-tuning, padding) has loss 0 and
// no gradient, as PyTorch's cross_entropy with its default ignore_index.

#include <cstddef>
#include <cstdint>

namespace shardwise::kernels {

// The target of a position the loss does not count (PyTorch's ignore_index, -100).
inline constexpr std::int32_t kIgnoredTarget = -100;

void softmax_cross_entropy_forward(float* losses, float* probs, const float* logits,
                                   const std::int32_t* targets, std::size_t rows,
                                   std::size_t vocab);

void softmax_cross_entropy_backward(float* dlogits, const float* dlosses, const float* probs,
                                    const std::int32_t* targets, std::size_t rows,
                                    std::size_t vocab);

// The steps of the forward, for a vocabulary split over ranks (the tensor-parallel head), so that
// both compute the same arithmetic: each row's largest logit; probs = exp(logits - largest) and
// each row's sum of them; probs divided by a row's sum. Each row's result does not depend on the
// threads. (softmax_cross_entropy_forward is these three with the row's own largest and sum.)
void softmax_row_largest(float* largest, const float* logits, std::size_t rows, std::size_t vocab);
void softmax_row_exponentials(float* probs, float* sums, const float* logits, const float* largest,
                              std::size_t rows, std::size_t vocab);
void softmax_row_normalise(float* probs, const float* sums, std::size_t rows, std::size_t vocab);

// dlogits += probs * dlosses[row], the backward without its target term (the caller subtracts
// dlosses[row] at the target, where its rank holds the target's column). Rows whose target is
// kIgnoredTarget are left as they are.
void softmax_row_add_scaled(float* dlogits, const float* probs, const float* dlosses,
                            const std::int32_t* targets, std::size_t rows, std::size_t vocab);

}  // namespace shardwise::kernels

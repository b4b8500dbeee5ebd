#include "shardwise/train/tensor_parallel.hpp"
#include "shardwise/core/element_type.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/kernels/embedding.hpp"
#include "shardwise/train/placement.hpp"

namespace shardwise::train {

TensorParallel::TensorParallel(const ParallelContext& context)
    : comm_(&context.communicator(kModelAxis)),
      group_(context.group(kModelAxis)),
      degree_(context.degree(kModelAxis)),
      rank_(context.coordinate(kModelAxis)) {}

void TensorParallel::sum(float* values, std::size_t count, DType message) const {
  if (degree_ == 1 || count == 0) return;
  if (message == DType::kBF16) {
    staging16_.resize(count);
    kernels::to_bf16({values, count}, {staging16_.data(), count});
    comm_->all_reduce(staging16_.data(), staging16_.data(), count, DType::kBF16, ReduceOp::kSum,
                      group_);
    kernels::to_float({staging16_.data(), count}, {values, count});
    return;
  }
  comm_->all_reduce(values, values, count, element_type(values), ReduceOp::kSum, group_);
}

void TensorParallel::sum_among(float* values, std::size_t count, int sharers) const {
  if (sharers <= 0 || degree_ % sharers != 0) {
    throw InvalidArgument("a sum among " + std::to_string(sharers) + " of " +
                          std::to_string(degree_) + " model ranks: the count must divide them");
  }
  if (sharers == degree_) {
    sum(values, count);
    return;
  }
  if (sharers == 1 || count == 0) return;
  if (sharers_group_.size() != sharers) {
    std::vector<Rank> ranks;
    const int first = rank_ / sharers * sharers;
    for (int i = 0; i < sharers; ++i) ranks.push_back(group_[first + i]);
    sharers_group_ = Group(std::move(ranks), group_.axes());
  }
  comm_->all_reduce(values, values, count, element_type(values), ReduceOp::kSum, sharers_group_);
}

void TensorParallel::gather(float* full, const float* local, std::size_t count) const {
  if (degree_ == 1) {
    std::copy(local, local + count, full);
    return;
  }
  comm_->all_gather(local, full, count, element_type(local), group_);
}

void TensorParallel::share_first(std::int32_t* values, std::size_t count) const {
  if (degree_ == 1 || count == 0) return;
  comm_->broadcast(values, count, DType::kI32, group_[0], group_);
}

namespace {

// `count` elements from one type to another: a copy between float32s, rounded to bf16 or widened.
void convert(const float* from, float* to, std::size_t count) { std::copy(from, from + count, to); }
void convert(const float* from, BFloat16* to, std::size_t count) {
  kernels::to_bf16({from, count}, {to, count});
}
void convert(const BFloat16* from, float* to, std::size_t count) {
  kernels::to_float({from, count}, {to, count});
}

// A sequence's parts over t ranks, whose messages are of type M (float32 or bf16): a part is one
// sequence's positions on one rank (`part` elements); the collective moves every rank's `batch`
// parts together, rank by rank, and they are put in their place in the whole (batch, t parts).
// `mine` holds this rank's parts converted where M is not float32.
template <typename M>
void gather_parts(Communicator& comm, const Group& group, std::size_t t, float* full,
                  const float* local, std::size_t batch, std::size_t part, std::vector<M>& staging,
                  std::vector<M>* mine) {
  const M* sent = nullptr;
  if constexpr (std::is_same_v<M, float>) {
    sent = local;
  } else {
    mine->resize(batch * part);
    convert(local, mine->data(), mine->size());
    sent = mine->data();
  }
  staging.resize(t * batch * part);
  comm.all_gather(sent, staging.data(), batch * part, element_type(sent), group);
  for (std::size_t r = 0; r < t; ++r) {
    for (std::size_t b = 0; b < batch; ++b) {
      convert(staging.data() + (r * batch + b) * part, full + (b * t + r) * part, part);
    }
  }
}

template <typename M>
void reduce_scatter_parts(Communicator& comm, const Group& group, std::size_t t, float* local,
                          const float* full, std::size_t batch, std::size_t part,
                          std::vector<M>& staging, std::vector<M>* mine) {
  staging.resize(t * batch * part);
  for (std::size_t r = 0; r < t; ++r) {
    for (std::size_t b = 0; b < batch; ++b) {
      convert(full + (b * t + r) * part, staging.data() + (r * batch + b) * part, part);
    }
  }
  M* received = nullptr;
  if constexpr (std::is_same_v<M, float>) {
    received = local;
  } else {
    mine->resize(batch * part);
    received = mine->data();
  }
  comm.reduce_scatter(staging.data(), received, batch * part, element_type(received),
                      ReduceOp::kSum, group);
  if constexpr (!std::is_same_v<M, float>) convert(received, local, batch * part);
}

}  // namespace

void TensorParallel::gather_sequence(float* full, const float* local, std::size_t batch,
                                     std::size_t seq, std::size_t channels, DType message) const {
  const auto t = static_cast<std::size_t>(degree_);
  const std::size_t part = seq / t * channels;  // one sequence's positions on one rank
  if (degree_ == 1) {
    std::copy(local, local + batch * seq * channels, full);
  } else if (message == DType::kBF16) {
    gather_parts(*comm_, group_, t, full, local, batch, part, staging16_, &local16_);
  } else {
    gather_parts<float>(*comm_, group_, t, full, local, batch, part, staging_, nullptr);
  }
}

void TensorParallel::reduce_scatter_sequence(float* local, const float* full, std::size_t batch,
                                             std::size_t seq, std::size_t channels,
                                             DType message) const {
  const auto t = static_cast<std::size_t>(degree_);
  const std::size_t part = seq / t * channels;
  if (degree_ == 1) {
    std::copy(full, full + batch * seq * channels, local);
  } else if (message == DType::kBF16) {
    reduce_scatter_parts(*comm_, group_, t, local, full, batch, part, staging16_, &local16_);
  } else {
    reduce_scatter_parts<float>(*comm_, group_, t, local, full, batch, part, staging_, nullptr);
  }
}

template <typename Table>
void TensorParallel::lookup_rows(float* out, const std::int32_t* tokens, const Table* wte,
                                 std::size_t rows, std::size_t channels, std::size_t vocab_start,
                                 std::size_t vocab_local) const {
  for (std::size_t i = 0; i < rows; ++i) {
    float* y = out + i * channels;
    const auto token = static_cast<std::size_t>(tokens[i]);
    if (token >= vocab_start && token < vocab_start + vocab_local) {
      kernels::copy_row(y, wte, token - vocab_start, channels);
    } else {
      std::fill(y, y + channels, 0.0F);
    }
  }
}

void TensorParallel::lookup(float* out, const std::int32_t* tokens, const float* wte,
                            std::size_t rows, std::size_t channels, std::size_t vocab_start,
                            std::size_t vocab_local) const {
  lookup_rows(out, tokens, wte, rows, channels, vocab_start, vocab_local);
}

void TensorParallel::lookup(float* out, const std::int32_t* tokens, const BFloat16* wte,
                            std::size_t rows, std::size_t channels, std::size_t vocab_start,
                            std::size_t vocab_local) const {
  lookup_rows(out, tokens, wte, rows, channels, vocab_start, vocab_local);
}

void TensorParallel::lookup_backward(float* dwte, const float* dout, const std::int32_t* tokens,
                                     std::size_t rows, std::size_t channels,
                                     std::size_t vocab_start, std::size_t vocab_local) const {
  for (std::size_t i = 0; i < rows; ++i) {
    const auto token = static_cast<std::size_t>(tokens[i]);
    if (token < vocab_start || token >= vocab_start + vocab_local) continue;
    const float* dy = dout + i * channels;
    float* dtoken = dwte + (token - vocab_start) * channels;
    for (std::size_t c = 0; c < channels; ++c) dtoken[c] += dy[c];
  }
}

void TensorParallel::embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                       const float* wpe, std::size_t batch, std::size_t seq,
                                       std::size_t channels, std::size_t vocab_start,
                                       std::size_t vocab_local, DType message) const {
  embed(out, tokens, wte, wpe, batch, seq, channels, vocab_start, vocab_local, message);
}

void TensorParallel::embedding_forward(float* out, const std::int32_t* tokens, const BFloat16* wte,
                                       const float* wpe, std::size_t batch, std::size_t seq,
                                       std::size_t channels, std::size_t vocab_start,
                                       std::size_t vocab_local, DType message) const {
  embed(out, tokens, wte, wpe, batch, seq, channels, vocab_start, vocab_local, message);
}

template <typename Table>
void TensorParallel::embed(float* out, const std::int32_t* tokens, const Table* wte,
                           const float* wpe, std::size_t batch, std::size_t seq,
                           std::size_t channels, std::size_t vocab_start, std::size_t vocab_local,
                           DType message) const {
  if (degree_ == 1) {
    kernels::embedding_forward(out, tokens, wte, wpe, batch, seq, channels);
    return;
  }
  const std::size_t rows = batch * seq;
  lookup(out, tokens, wte, rows, channels, vocab_start, vocab_local);
  sum(out, rows * channels, message);  // exactly one rank holds each token's row
  for (std::size_t i = 0; i < rows; ++i) {
    const float* position = wpe + (i % seq) * channels;
    float* y = out + i * channels;
    for (std::size_t c = 0; c < channels; ++c) y[c] += position[c];
  }
}

void TensorParallel::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                        const std::int32_t* tokens, std::size_t batch,
                                        std::size_t seq, std::size_t channels,
                                        std::size_t vocab_start, std::size_t vocab_local) const {
  if (degree_ == 1) {
    kernels::embedding_backward(dwte, dwpe, dout, tokens, batch, seq, channels);
    return;
  }
  for (std::size_t i = 0; i < batch * seq; ++i) {
    const float* dy = dout + i * channels;
    float* dposition = dwpe + (i % seq) * channels;
    for (std::size_t c = 0; c < channels; ++c) dposition[c] += dy[c];
  }
  lookup_backward(dwte, dout, tokens, batch * seq, channels, vocab_start, vocab_local);
}

void TensorParallel::cross_entropy_forward(float* losses, float* probs, const float* logits,
                                           const std::int32_t* targets, std::size_t rows,
                                           std::size_t vocab_local, std::size_t vocab_start) const {
  if (degree_ == 1) {
    kernels::softmax_cross_entropy_forward(losses, probs, logits, targets, rows, vocab_local);
    return;
  }
  // The largest logit of each row over every rank, then the sum of exponentials and the
  // target's logit (held by one rank), summed over the axis in one all-reduce. The arithmetic is
  // the one-rank kernel's, step by step.
  std::vector<float> largest(rows);
  kernels::softmax_row_largest(largest.data(), logits, rows, vocab_local);
  comm_->all_reduce(largest.data(), largest.data(), rows, element_type(largest.data()),
                    ReduceOp::kMax, group_);
  std::vector<float> row_sums(rows);
  kernels::softmax_row_exponentials(probs, row_sums.data(), logits, largest.data(), rows,
                                    vocab_local);
  std::vector<float> sums(2 * rows, 0.0F);  // per row: the sum of exponentials, the target logit
  for (std::size_t r = 0; r < rows; ++r) {
    sums[2 * r] = row_sums[r];
    if (targets[r] == kernels::kIgnoredTarget) continue;
    const auto target = static_cast<std::size_t>(targets[r]);
    if (target >= vocab_start && target < vocab_start + vocab_local) {
      sums[2 * r + 1] = logits[r * vocab_local + target - vocab_start];
    }
  }
  sum(sums.data(), sums.size());
  for (std::size_t r = 0; r < rows; ++r) {
    row_sums[r] = sums[2 * r];
    losses[r] = targets[r] == kernels::kIgnoredTarget
                    ? 0.0F
                    : std::log(sums[2 * r]) + largest[r] - sums[2 * r + 1];
  }
  kernels::softmax_row_normalise(probs, row_sums.data(), rows, vocab_local);
}

void TensorParallel::cross_entropy_backward(float* dlogits, const float* dlosses,
                                            const float* probs, const std::int32_t* targets,
                                            std::size_t rows, std::size_t vocab_local,
                                            std::size_t vocab_start) const {
  if (degree_ == 1) {
    kernels::softmax_cross_entropy_backward(dlogits, dlosses, probs, targets, rows, vocab_local);
    return;
  }
  kernels::softmax_row_add_scaled(dlogits, probs, dlosses, targets, rows, vocab_local);
  for (std::size_t r = 0; r < rows; ++r) {
    if (targets[r] == kernels::kIgnoredTarget) continue;
    const auto target = static_cast<std::size_t>(targets[r]);
    if (target >= vocab_start && target < vocab_start + vocab_local) {
      dlogits[r * vocab_local + target - vocab_start] -= dlosses[r];
    }
  }
}

}  // namespace shardwise::train

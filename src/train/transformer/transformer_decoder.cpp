#include "transformer_decoder.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/elementwise.hpp"

namespace shardwise::train::transformer {
namespace {

std::size_t checked_capacity(const TransformerShape& shape, std::size_t capacity,
                             const TensorParallel& tp) {
  const auto t = static_cast<std::size_t>(tp.degree());
  if (shape.vocab % t != 0) {
    throw InvalidArgument("a decoder over " + std::to_string(t) + " model ranks: the vocabulary (" +
                          std::to_string(shape.vocab) + ") must be a multiple of them");
  }
  if (capacity > shape.context) {
    throw InvalidArgument("a decoder caching " + std::to_string(capacity) +
                          " positions; the model's context is " + std::to_string(shape.context));
  }
  return capacity == 0 ? shape.context : capacity;
}

}  // namespace

TransformerDecoder::TransformerDecoder(const TransformerSpec& spec, const ModelDefinition& model,
                                       ParameterStore& store, const TensorParallel& tensor_parallel,
                                       std::size_t capacity, Precision precision)
    : spec_(spec),
      places_(parameter_layout(spec.shape)),
      store_(store),
      // Decoding sums in float32 whatever it computes in: the greedy tokens of every model
      // degree stay one rank's.
      axis_(tensor_parallel, false, spec.shape.hidden, precision, DType::kF32),
      experts_(tensor_parallel),
      norm_(spec.shape.norm, static_cast<float>(spec.norm_eps), axis_),
      attention_(spec_, axis_),
      mlp_(spec.shape, axis_, experts_),
      embedding_(spec.shape, axis_),
      capacity_(checked_capacity(spec.shape, capacity, tensor_parallel)) {
  index_ =
      chunk_parameter_indices(model, store_, {0, spec_.shape.layers}, tensor_parallel.degree());
  attention_.reserve_positions(capacity_);
  const std::size_t cached = capacity_ * attention_.kv_width();
  keys_.assign(spec_.shape.layers * cached, 0.0F);
  values_.assign(spec_.shape.layers * cached, 0.0F);
  local_logits_.assign(embedding_.vocab_local(), 0.0F);
}

std::size_t TransformerDecoder::cache_bytes() const {
  std::size_t floats = 0;
  for (const auto* v : {&keys_, &values_, &x_, &normed_, &statistics_, &queries_, &attention_out_,
                        &qk_statistics_, &projected_, &mlp_arrays_, &local_logits_}) {
    floats += v->size();
  }
  return floats * sizeof(float);
}

void TransformerDecoder::size_scratch(std::size_t rows) {
  const std::size_t C = spec_.shape.hidden;
  if (x_.size() >= rows * C) return;
  for (auto* v : {&x_, &normed_, &projected_}) v->assign(rows * C, 0.0F);
  statistics_.assign(rows * spec_.shape.norm_statistics(), 0.0F);
  queries_.assign(rows * attention_.query_scratch_width(), 0.0F);
  attention_out_.assign(rows * attention_.q_width(), 0.0F);
  qk_statistics_.assign(
      spec_.shape.qk_norm ? rows * (attention_.heads() + attention_.kv_heads()) : 0, 0.0F);
  const auto t = static_cast<std::size_t>(axis_.tp().degree());
  mlp_arrays_.assign(rows * std::max(spec_.shape.mlp_row_elements(t),
                                     spec_.shape.mixed_layers() ? spec_.shape.dense_row_elements(t)
                                                                : std::size_t{0}),
                     0.0F);
  router_.assign(rows * spec_.shape.experts, 0.0F);
}

void TransformerDecoder::forward(std::span<const std::int32_t> tokens, std::span<float> logits) {
  const std::size_t vocab = spec_.shape.vocab;
  if (tokens.empty()) throw InvalidArgument("a decoder's forward of no tokens");
  if (tokens.size() > capacity_ - length_) {
    throw InvalidArgument("a decoder's forward of " + std::to_string(tokens.size()) +
                          " positions after " + std::to_string(length_) + "; it caches " +
                          std::to_string(capacity_));
  }
  if (logits.size() != vocab) {
    throw InvalidArgument("a decoder's logits of " + std::to_string(logits.size()) +
                          " values; the vocabulary has " + std::to_string(vocab));
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= vocab) {
      throw InvalidArgument("token " + std::to_string(i) + " is " + std::to_string(tokens[i]) +
                            ", outside the model's vocabulary of " + std::to_string(vocab));
    }
  }
  compute(tokens.data(), tokens.size(), length_);
  axis_.tp().gather(logits.data(), local_logits_.data(), local_logits_.size());
  length_ += tokens.size();
}

void TransformerDecoder::compute(const std::int32_t* tokens, std::size_t rows,
                                 std::size_t first_position) {
  size_scratch(rows);
  const std::size_t C = spec_.shape.hidden;
  const Rows rw{1, rows, rows, rows};
  float* const x = x_.data();
  embedding_.decode(x, tokens, rows, first_position, parameters(0));
  const std::size_t cached = capacity_ * attention_.kv_width();
  const std::size_t norm = places_.norm, attention = places_.attention;
  for (std::size_t l = 0; l < spec_.shape.layers; ++l) {
    const ParameterView p = parameters(places_.layer_first(l));
    norm_.forward(normed_.data(), statistics_.data(), x, p, rw);
    attention_.decode(projected_.data(), queries_.data(), attention_out_.data(),
                      qk_statistics_.data(), keys_.data() + l * cached, values_.data() + l * cached,
                      first_position, rows, normed_.data(), p.from(norm));
    kernels::residual_forward(x, x, projected_.data(), rows * C);
    norm_.forward(normed_.data(), statistics_.data(), x, p.from(norm + attention), rw);
    mlp_.forward(l, projected_.data(), mlp_arrays_.data(), router_.data(), normed_.data(),
                 p.from(2 * norm + attention), rw);
    kernels::residual_forward(x, x, projected_.data(), rows * C);
  }
  // The head reads the last position only.
  norm_.forward(normed_.data(), statistics_.data(), x + (rows - 1) * C,
                parameters(places_.final_norm()), {1, 1, 1, 1});
  axis_.products().forward(local_logits_.data(), normed_.data(), parameters(places_.head), 0,
                           nullptr, 1, C, embedding_.vocab_local());
}

}  // namespace shardwise::train::transformer

namespace shardwise::train {

std::unique_ptr<Decoder> make_transformer_decoder(const TransformerSpec& spec,
                                                  const ModelDefinition& model,
                                                  ParameterStore& store,
                                                  const TensorParallel& tensor_parallel,
                                                  std::size_t capacity, Precision precision) {
  return std::make_unique<transformer::TransformerDecoder>(spec, model, store, tensor_parallel,
                                                           capacity, precision);
}

}  // namespace shardwise::train

// The Llama chunk's construction, activations and forward (detail/llama_chunk.hpp).
#include "detail/llama_chunk.hpp"

#include <algorithm>

#include "detail/llama_layout.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/kernels/rmsnorm.hpp"
#include "shardwise/kernels/swiglu.hpp"
#include "shardwise/train/chunk_inputs.hpp"
#include "shardwise/train/head_blocks.hpp"

namespace shardwise::models::detail {

using train::ParameterSpec;

LlamaChunk::LlamaChunk(LlamaConfig config, train::ParameterStore& store,
                       const train::ChunkOptions& options)
    : config_(config),
      range_(options.range.end_layer == 0 ? train::LayerRange{0, config.n_layer} : options.range),
      store_(store),
      tp_(options.tensor_parallel),
      sequence_parallel_(options.sequence_parallel),
      recompute_(options.recompute) {
  if (sequence_parallel_ && tp_.degree() == 1) {
    throw InvalidArgument(
        "sequence parallelism splits the sequence over the model axis; the mesh has none");
  }
  has_head_ = range_.has_last(config_.n_layer);
  const int degree = tp_.degree();
  const auto t = static_cast<std::size_t>(degree);
  index_ = train::chunk_parameter_indices(LlamaDefinition(config_), store_, range_, degree);
  const auto r = static_cast<std::size_t>(tp_.rank());
  heads_ = config_.n_head / t;
  q_width_ = heads_ * config_.head_dim;
  replicated_kv_ = replicates_kv_heads(config_, degree);
  // Replicated: a rank holds and computes with the one head its query heads read, head r / (t /
  // kv) (its query heads all lie in that head's group), as t / kv ranks do (llama_shared_rows).
  kv_heads_ = replicated_kv_ ? 1 : config_.n_kv_head / t;
  kv_sharers_ = replicated_kv_ ? static_cast<int>(t / config_.n_kv_head) : 1;
  kv_width_ = kv_heads_ * config_.head_dim;
  if (replicated_kv_) {
    // The store's rows of each key/value projection must be the head this rank's queries read.
    const auto first_row =
        static_cast<std::int64_t>(r / static_cast<std::size_t>(kv_sharers_) * config_.head_dim);
    for (std::size_t l = range_.first_layer; l < range_.end_layer; ++l) {
      for (const std::size_t which : {kKProj, kVProj}) {
        const ParameterSpec& held = store_.specs()[index_[llama_layer_param(l, which)]];
        if (held.block.empty() || held.block[0].start != first_row) {
          throw InvalidArgument(
              "parameter '" + held.name + "' holds rows " +
              (held.block.empty() ? std::string("all") : shardwise::to_string(held.block)) +
              " on model rank " + std::to_string(r) + "; its queries read rows [" +
              std::to_string(first_row) + ", " +
              std::to_string(first_row + static_cast<std::int64_t>(config_.head_dim)) + ")");
        }
      }
    }
  }
  mlp_ = config_.intermediate_size / t;
  vocab_ = config_.vocab_size / t;
  vocab_start_ = r * vocab_;
  frequencies_ =
      kernels::rotary_frequencies(config_.head_dim, config_.rope_theta, config_.rope_scaling);
}

std::size_t LlamaChunk::Activations::bytes() const {
  std::size_t floats = 0;
  for (const auto* kept : {&encoded, &norm1, &rstd1, &q, &k, &v, &atty, &lse, &residual2, &norm2,
                           &rstd2, &gate, &up, &act, &residual3, &normf, &rstdf, &losses}) {
    floats += kept->size();
  }
  return floats * sizeof(float);
}

LlamaChunk::Activations& LlamaChunk::slot(std::size_t index) {
  while (slots_.size() <= index) slots_.push_back(std::make_unique<Activations>());
  return *slots_[index];
}

std::size_t LlamaChunk::local_rows(std::size_t batch, std::size_t seq) const {
  return sequence_parallel_ ? batch * seq / static_cast<std::size_t>(tp_.degree()) : batch * seq;
}

std::size_t LlamaChunk::boundary_elements(std::size_t batch, std::size_t seq) const {
  return local_rows(batch, seq) * config_.hidden_size;
}

void LlamaChunk::size_activations(Activations& a, std::size_t batch, std::size_t seq) {
  if (batch == a.batch && seq == a.seq) return;
  a.batch = batch;
  a.seq = seq;
  const std::size_t L = layers(), C = config_.hidden_size, BT = batch * seq;
  const std::size_t R = local_rows(batch, seq);
  a.encoded.assign(R * C, 0);
  a.residual3.assign(L * R * C, 0);
  if (recompute_ == Recompute::kFull) {
    if (recomputed_.batch != batch || recomputed_.seq != seq) {
      recomputed_.batch = batch;
      recomputed_.seq = seq;
      size_layers(recomputed_, std::min<std::size_t>(L, 1), batch, seq);
    }
  } else {
    size_layers(a, L, batch, seq);
  }
  const std::size_t head = has_head_ ? 1 : 0;
  a.normf.assign(head * BT * C, 0);
  a.rstdf.assign(head * R, 0);
  a.losses.assign(head * BT, 0);
}

void LlamaChunk::size_layers(Activations& a, std::size_t n, std::size_t batch,
                             std::size_t seq) const {
  const std::size_t C = config_.hidden_size, BT = batch * seq, R = local_rows(batch, seq);
  for (auto* v : {&a.norm1, &a.norm2}) v->assign(n * BT * C, 0);
  for (auto* v : {&a.rstd1, &a.rstd2}) v->assign(n * R, 0);
  a.residual2.assign(n * R * C, 0);
  for (auto* v : {&a.q, &a.atty}) v->assign(n * BT * q_width_, 0);
  for (auto* v : {&a.k, &a.v}) v->assign(n * BT * kv_width_, 0);
  a.lse.assign(n * batch * heads_ * seq, 0);
  for (auto* v : {&a.gate, &a.up, &a.act}) v->assign(n * BT * mlp_, 0);
}

void LlamaChunk::size_scratch(std::size_t batch, std::size_t seq) {
  if (batch == scratch_batch_ && seq == scratch_seq_) return;
  scratch_batch_ = batch;
  scratch_seq_ = seq;
  const std::size_t C = config_.hidden_size, BT = batch * seq, R = local_rows(batch, seq);
  dresidual_.assign(R * C, 0);
  projected_.assign(BT * C, 0);  // this rank's rows of a row-parallel output; dnorm() whole
  const bool own = !attention_grads_in_mlp();
  for (auto* v : {&dq_, &datty_}) v->assign(own ? BT * q_width_ : 0, 0);
  for (auto* v : {&dk_, &dv_}) v->assign(own ? BT * kv_width_ : 0, 0);
  const std::size_t block = has_head_ ? train::head_block_rows(BT, vocab_) : 0;
  for (auto* v : {&logits_, &probs_}) v->assign(block * vocab_, 0);
  if (sequence_parallel_) {
    for (auto* v : {&dnorm_local_, &norm_local_}) v->assign(R * C, 0);
    for (auto* v : {&partial_, &dfull_}) v->assign(BT * C, 0);
    norm_grad_.assign(C, 0);
  }
  if (replicated_kv_) kv_grad_.assign(2 * kv_width_ * C, 0);
}

bool LlamaChunk::attention_grads_in_mlp() const {
  return 2 * q_width_ <= mlp_ && 2 * kv_width_ <= mlp_;
}

std::size_t LlamaChunk::activation_bytes() const {
  std::size_t bytes = recomputed_.bytes();
  for (const auto& a : slots_) bytes += a->bytes();
  std::size_t floats = 0;
  for (const auto* v : {&dresidual_, &projected_, &dq_, &dk_, &dv_, &datty_, &logits_, &probs_,
                        &dnorm_local_, &norm_local_, &partial_, &dfull_, &norm_grad_, &kv_grad_}) {
    floats += v->size();
  }
  return bytes + floats * sizeof(float);
}

train::ChunkLimits LlamaChunk::limits() const {
  return {range_, config_.n_layer, config_.context_length, config_.vocab_size,
          sequence_parallel_ ? tp_.degree() : 1};
}

const kernels::RotaryTable& LlamaChunk::rotary(std::size_t seq) {
  if (rotary_.positions() < seq) rotary_ = kernels::RotaryTable(frequencies_, seq);
  return rotary_;
}

LlamaChunk::Layer LlamaChunk::layer(Activations& a, std::size_t l) {
  const std::size_t C = config_.hidden_size, BT = a.batch * a.seq, R = local_rows(a.batch, a.seq);
  float* const output = a.residual3.data() + l * R * C;
  Activations& kept = recompute_ == Recompute::kFull ? recomputed_ : a;
  const std::size_t k = recompute_ == Recompute::kFull ? 0 : l;
  return {kept.norm1.data() + k * BT * C,
          kept.rstd1.data() + k * R,
          kept.q.data() + k * BT * q_width_,
          kept.k.data() + k * BT * kv_width_,
          kept.v.data() + k * BT * kv_width_,
          kept.atty.data() + k * BT * q_width_,
          kept.lse.data() + k * a.batch * heads_ * a.seq,
          projected_.data(),
          kept.residual2.data() + k * R * C,
          kept.norm2.data() + k * BT * C,
          kept.rstd2.data() + k * R,
          kept.gate.data() + k * BT * mlp_,
          kept.up.data() + k * BT * mlp_,
          kept.act.data() + k * BT * mlp_,
          projected_.data(),
          output};
}

std::size_t LlamaChunk::head_weight() const {
  return config_.tie_word_embeddings ? kEmbedTokens : llama_lm_head(config_.n_layer);
}

void LlamaChunk::norm_forward(float* out, float* rstd, const float* inp, const float* weight,
                              std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.hidden_size, R = local_rows(batch, seq);
  float* local = sequence_parallel_ ? norm_local_.data() : out;
  kernels::rmsnorm_forward(local, rstd, inp, weight, static_cast<float>(config_.rms_norm_eps), R,
                           C);
  if (sequence_parallel_) tp_.gather_sequence(out, local, batch, seq, C);
}

void LlamaChunk::row_parallel(float* out, const float* inp, const float* weight,
                              std::size_t in_local, std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.hidden_size, BT = batch * seq;
  if (!sequence_parallel_) {
    tp_.row_parallel_forward(out, inp, weight, nullptr, BT, in_local, C);
    return;
  }
  kernels::matmul_forward(partial_.data(), inp, weight, nullptr, BT, in_local, C);
  tp_.reduce_scatter_sequence(out, partial_.data(), batch, seq, C);
}

void LlamaChunk::layer_forward(const Layer& a, const float* residual, std::size_t l,
                               std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.hidden_size, BT = batch * seq, R = local_rows(batch, seq);
  norm_forward(a.norm1, a.rstd1, residual, value(llama_layer_param(l, kInputNorm)), batch, seq);
  // Column-parallel q, k and v of this rank's heads, rotated; row-parallel output projection.
  kernels::matmul_forward(a.q, a.norm1, value(llama_layer_param(l, kQProj)), nullptr, BT, C,
                          q_width_);
  kernels::matmul_forward(a.k, a.norm1, value(llama_layer_param(l, kKProj)), nullptr, BT, C,
                          kv_width_);
  kernels::matmul_forward(a.v, a.norm1, value(llama_layer_param(l, kVProj)), nullptr, BT, C,
                          kv_width_);
  rotary(seq).rotate(a.q, batch, seq, heads_, q_width_);
  rotary(seq).rotate(a.k, batch, seq, kv_heads_, kv_width_);
  const kernels::AttentionLayout attention{batch,    seq,      heads_, kv_heads_, config_.head_dim,
                                           q_width_, kv_width_};
  kernels::attention_forward(a.atty, a.lse, a.q, a.k, a.v, attention);
  row_parallel(a.attproj, a.atty, value(llama_layer_param(l, kOProj)), q_width_, batch, seq);
  kernels::residual_forward(a.residual2, residual, a.attproj, R * C);
  norm_forward(a.norm2, a.rstd2, a.residual2, value(llama_layer_param(l, kPostNorm)), batch, seq);
  kernels::matmul_forward(a.gate, a.norm2, value(llama_layer_param(l, kGateProj)), nullptr, BT, C,
                          mlp_);
  kernels::matmul_forward(a.up, a.norm2, value(llama_layer_param(l, kUpProj)), nullptr, BT, C,
                          mlp_);
  kernels::swiglu_forward(a.act, a.gate, a.up, BT * mlp_);
  row_parallel(a.down, a.act, value(llama_layer_param(l, kDownProj)), mlp_, batch, seq);
  kernels::residual_forward(a.residual3, a.residual2, a.down, R * C);
}

float LlamaChunk::forward(std::size_t slot_index, std::span<const std::int32_t> tokens,
                          std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                          std::span<const float> input, std::span<float> output,
                          bool backward_follows) {
  train::check_chunk_batch(tokens, targets, batch, seq, limits());
  const std::size_t boundary = boundary_elements(batch, seq);
  train::check_chunk_forward_boundary(input.size(), output.size(), boundary, limits());
  Activations& act = slot(slot_index);
  size_activations(act, batch, seq);
  size_scratch(batch, seq);
  if (range_.has_first()) act.tokens.assign(tokens.begin(), tokens.end());
  if (has_head_) act.targets.assign(targets.begin(), targets.end());
  const std::size_t C = config_.hidden_size, BT = batch * seq;
  act.head_held = false;
  if (!range_.has_first()) {
    std::copy(input.begin(), input.end(), act.encoded.begin());
  } else {
    // Each rank looks up the tokens of its vocabulary rows; the sum over the axis completes
    // the lookups (scattered along the sequence under sequence parallelism).
    store_.gather(unit(kEmbedTokens));
    float* looked_up = sequence_parallel_ ? partial_.data() : act.encoded.data();
    tp_.lookup(looked_up, act.tokens.data(), value(kEmbedTokens), BT, C, vocab_start_, vocab_);
    if (sequence_parallel_) {
      tp_.reduce_scatter_sequence(act.encoded.data(), partial_.data(), batch, seq, C);
    } else {
      tp_.sum(act.encoded.data(), BT * C);
    }
    store_.release(unit(kEmbedTokens));
  }
  const float* residual = act.encoded.data();
  for (std::size_t i = 0; i < layers(); ++i) {
    const std::size_t l = range_.first_layer + i;
    const Layer a = layer(act, i);
    store_.gather(unit(llama_layer_param(l, 0)));
    layer_forward(a, residual, l, batch, seq);
    store_.release(unit(llama_layer_param(l, 0)));
    residual = a.residual3;
  }
  if (!has_head_) {
    std::copy(residual, residual + boundary, output.begin());
    return 0;
  }
  const std::size_t norm = llama_final_norm(config_.n_layer);
  store_.gather(unit(norm));
  if (config_.tie_word_embeddings) store_.gather(unit(kEmbedTokens));
  norm_forward(act.normf.data(), act.rstdf.data(), residual, value(norm), batch, seq);
  const std::size_t block = train::head_block_rows(BT, vocab_);
  for (std::size_t r0 = 0; r0 < BT; r0 += block) {
    const std::size_t rows = std::min(block, BT - r0);
    kernels::matmul_forward(logits_.data(), act.normf.data() + r0 * C, value(head_weight()),
                            nullptr, rows, C, vocab_);
    tp_.cross_entropy_forward(act.losses.data() + r0, probs_.data(), logits_.data(),
                              act.targets.data() + r0, rows, vocab_, vocab_start_);
  }
  if (backward_follows) {
    act.head_held = true;
  } else {
    if (config_.tie_word_embeddings) store_.release(unit(kEmbedTokens));
    store_.release(unit(norm));
  }
  double sum = 0;
  for (float loss : act.losses) sum += loss;
  return static_cast<float>(sum / static_cast<double>(BT));
}

}  // namespace shardwise::models::detail

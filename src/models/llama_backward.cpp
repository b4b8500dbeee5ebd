// The Llama chunk's backward (detail/llama_chunk.hpp).
#include <algorithm>
#include <utility>

#include "detail/llama_chunk.hpp"
#include "detail/llama_layout.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/kernels/rmsnorm.hpp"
#include "shardwise/kernels/swiglu.hpp"
#include "shardwise/train/chunk_inputs.hpp"
#include "shardwise/train/head_blocks.hpp"

namespace shardwise::models::detail {

using kernels::InputGradient;

const float* LlamaChunk::column_input_grad(std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.hidden_size;
  if (!sequence_parallel_) {
    tp_.sum(dnorm(), batch * seq * C);
    return dnorm();
  }
  tp_.reduce_scatter_sequence(dnorm_local_.data(), dnorm(), batch, seq, C);
  return dnorm_local_.data();
}

const float* LlamaChunk::whole_output_grad(const float* local, std::size_t batch, std::size_t seq) {
  if (!sequence_parallel_) return local;
  tp_.gather_sequence(dfull_.data(), local, batch, seq, config_.hidden_size);
  return dfull_.data();
}

void LlamaChunk::norm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                               const float* weight, const float* rstd, std::size_t batch,
                               std::size_t seq) {
  const std::size_t C = config_.hidden_size, R = local_rows(batch, seq);
  if (!sequence_parallel_) {
    kernels::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, R, C);
    return;
  }
  // This rank's positions' part of the weight's gradient, summed over the axis in a scratch so
  // that only this pass's part is summed.
  std::fill(norm_grad_.begin(), norm_grad_.end(), 0.0F);
  kernels::rmsnorm_backward(dinp, norm_grad_.data(), dout, inp, weight, rstd, R, C);
  tp_.sum(norm_grad_.data(), C);
  for (std::size_t c = 0; c < C; ++c) dweight[c] += norm_grad_[c];
}

void LlamaChunk::tell(const train::GradientsReady& ready, std::size_t first,
                      std::size_t last) const {
  if (!ready) return;
  ready(store_.offset(index_[first]), store_.offset(index_[last]) + store_.count(index_[last]));
}

void LlamaChunk::head_backward(Activations& act, float loss_scale) {
  const std::size_t C = config_.hidden_size, BT = act.batch * act.seq;
  const std::size_t R = local_rows(act.batch, act.seq), L = layers();
  const std::size_t norm = llama_final_norm(config_.n_layer);
  if (!std::exchange(act.head_held, false)) {
    store_.gather(unit(norm));
    if (config_.tie_word_embeddings) store_.gather(unit(kEmbedTokens));
  }
  const std::size_t block = train::head_block_rows(BT, vocab_);
  const std::vector<float> dlosses(block, loss_scale / static_cast<float>(BT));
  std::vector<float> losses(block);
  for (std::size_t r0 = 0; r0 < BT; r0 += block) {
    const std::size_t rows = std::min(block, BT - r0);
    const float* normf = act.normf.data() + r0 * C;
    kernels::matmul_forward(logits_.data(), normf, value(head_weight()), nullptr, rows, C, vocab_);
    tp_.cross_entropy_forward(losses.data(), probs_.data(), logits_.data(), act.targets.data() + r0,
                              rows, vocab_, vocab_start_);
    // The logits are read for the last time above: their gradient is written over them.
    float* dlogits = logits_.data();
    std::fill(dlogits, dlogits + rows * vocab_, 0.0F);
    tp_.cross_entropy_backward(dlogits, dlosses.data(), probs_.data(), act.targets.data() + r0,
                               rows, vocab_, vocab_start_);
    kernels::matmul_backward(dnorm() + r0 * C, grad(head_weight()), nullptr, dlogits, normf,
                             value(head_weight()), rows, C, vocab_, InputGradient::kOverwrite);
  }
  const float* dnormf = column_input_grad(act.batch, act.seq);
  if (config_.tie_word_embeddings) store_.release(unit(kEmbedTokens));
  const float* top = L > 0 ? act.residual3.data() + (L - 1) * R * C : act.encoded.data();
  std::fill(dresidual_.begin(), dresidual_.end(), 0.0F);
  norm_backward(dresidual_.data(), grad(norm), dnormf, top, value(norm), act.rstdf.data(),
                act.batch, act.seq);
}

void LlamaChunk::layer_backward(const Layer& a, const float* residual, std::size_t l,
                                std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.hidden_size, BT = batch * seq;
  const auto p = [&](std::size_t which) { return llama_layer_param(l, which); };
  // residual3 = residual2 + down: dresidual_ is d(residual2) along the residual path, and the
  // MLP's input gradient is added to it in place once the MLP's products have read it.
  // Each gradient of the MLP over the array it is the gradient of, read for the last time
  // computing it: the product's over the product (the down projection's weight gradient read it
  // first), gate's and up's over gate and up (the kernel reads an element before it writes).
  const float* dmlp = whole_output_grad(dresidual_.data(), batch, seq);
  float* const dact = a.act;
  kernels::matmul_backward(dact, grad(p(kDownProj)), nullptr, dmlp, a.act, value(p(kDownProj)), BT,
                           mlp_, C, InputGradient::kOverwrite);
  float* const dgate = a.gate;
  float* const dup = a.up;
  kernels::swiglu_backward(dgate, dup, dact, a.gate, a.up, BT * mlp_, InputGradient::kOverwrite);
  kernels::matmul_backward(dnorm(), grad(p(kGateProj)), nullptr, dgate, a.norm2,
                           value(p(kGateProj)), BT, C, mlp_, InputGradient::kOverwrite);
  kernels::matmul_backward(dnorm(), grad(p(kUpProj)), nullptr, dup, a.norm2, value(p(kUpProj)), BT,
                           C, mlp_);
  norm_backward(dresidual_.data(), grad(p(kPostNorm)), column_input_grad(batch, seq), a.residual2,
                value(p(kPostNorm)), a.rstd2, batch, seq);
  // residual2 = residual + attproj, the same way.
  // The attention's gradients in the MLP's arrays, which nothing reads any more, where they fit
  // (attention_grads_in_mlp()); else in scratch of their own.
  const bool in_mlp = attention_grads_in_mlp();
  float* const datty = in_mlp ? a.gate : datty_.data();
  float* const dq = in_mlp ? a.gate + BT * q_width_ : dq_.data();
  float* const dk = in_mlp ? a.up : dk_.data();
  float* const dv = in_mlp ? a.up + BT * kv_width_ : dv_.data();
  const float* dattention = whole_output_grad(dresidual_.data(), batch, seq);
  kernels::matmul_backward(datty, grad(p(kOProj)), nullptr, dattention, a.atty, value(p(kOProj)),
                           BT, q_width_, C, InputGradient::kOverwrite);
  const kernels::AttentionLayout attention{batch,    seq,      heads_, kv_heads_, config_.head_dim,
                                           q_width_, kv_width_};
  kernels::attention_backward(dq, dk, dv, datty, a.q, a.k, a.v, a.atty, a.lse, attention,
                              InputGradient::kOverwrite);
  rotary(seq).rotate_back(dq, batch, seq, heads_, q_width_);
  rotary(seq).rotate_back(dk, batch, seq, kv_heads_, kv_width_);
  kernels::matmul_backward(dnorm(), grad(p(kQProj)), nullptr, dq, a.norm1, value(p(kQProj)), BT, C,
                           q_width_, InputGradient::kOverwrite);
  // A replicated key/value head: this micro-batch's gradient of it in scratch, summed over the
  // ranks holding it (each adding its query heads' part), then added: every copy receives the
  // same whole gradient.
  const std::size_t kv_block = kv_width_ * C;
  float* dk_weight = replicated_kv_ ? kv_grad_.data() : grad(p(kKProj));
  float* dv_weight = replicated_kv_ ? kv_grad_.data() + kv_block : grad(p(kVProj));
  if (replicated_kv_) std::fill(kv_grad_.begin(), kv_grad_.end(), 0.0F);
  kernels::matmul_backward(dnorm(), dk_weight, nullptr, dk, a.norm1, value(p(kKProj)), BT, C,
                           kv_width_);
  kernels::matmul_backward(dnorm(), dv_weight, nullptr, dv, a.norm1, value(p(kVProj)), BT, C,
                           kv_width_);
  if (replicated_kv_) {
    tp_.sum_among(kv_grad_.data(), kv_grad_.size(), kv_sharers_);
    float* dk_held = grad(p(kKProj));
    float* dv_held = grad(p(kVProj));
    for (std::size_t i = 0; i < kv_block; ++i) {
      dk_held[i] += kv_grad_[i];
      dv_held[i] += kv_grad_[kv_block + i];
    }
  }
  norm_backward(dresidual_.data(), grad(p(kInputNorm)), column_input_grad(batch, seq), residual,
                value(p(kInputNorm)), a.rstd1, batch, seq);
}

void LlamaChunk::embedding_backward(Activations& act) {
  const std::size_t C = config_.hidden_size, BT = act.batch * act.seq;
  // Every rank has the whole gradient of the embedding's output (gathered along the sequence
  // under sequence parallelism); each adds into its rows of the vocabulary.
  tp_.lookup_backward(grad(kEmbedTokens), whole_output_grad(dresidual_.data(), act.batch, act.seq),
                      act.tokens.data(), BT, C, vocab_start_, vocab_);
}

void LlamaChunk::backward(std::size_t slot_index, std::span<const float> output_grad,
                          std::span<float> input_grad, float loss_scale,
                          const train::GradientsReady& ready) {
  if (slot_index >= slots_.size() || slots_[slot_index]->batch == 0) {
    throw InvalidArgument("backward of micro-batch slot " + std::to_string(slot_index) +
                          " before its forward");
  }
  Activations& act = *slots_[slot_index];
  const std::size_t batch = act.batch, seq = act.seq;
  const std::size_t boundary = boundary_elements(batch, seq);
  train::check_chunk_backward_boundary(output_grad.size(), input_grad.size(), boundary, limits());
  size_scratch(batch, seq);
  const std::size_t C = config_.hidden_size, R = local_rows(batch, seq), L = layers();
  if (!has_head_) {
    std::copy(output_grad.begin(), output_grad.end(), dresidual_.begin());
  } else {
    head_backward(act, loss_scale);
    const std::size_t norm = llama_final_norm(config_.n_layer);
    tell(ready, norm, config_.tie_word_embeddings ? norm : llama_lm_head(config_.n_layer));
    store_.release(unit(norm));
  }
  for (std::size_t i = L; i-- > 0;) {
    const std::size_t l = range_.first_layer + i;
    const float* residual = i == 0 ? act.encoded.data() : act.residual3.data() + (i - 1) * R * C;
    const Layer a = layer(act, i);
    store_.gather(unit(llama_layer_param(l, 0)));
    if (recompute_ == Recompute::kFull) layer_forward(a, residual, l, batch, seq);
    layer_backward(a, residual, l, batch, seq);
    tell(ready, llama_layer_param(l, 0), llama_layer_param(l, kLlamaPerLayer - 1));
    store_.release(unit(llama_layer_param(l, 0)));
  }
  if (!range_.has_first()) {
    std::copy(dresidual_.begin(), dresidual_.end(), input_grad.begin());
    return;
  }
  embedding_backward(act);
  tell(ready, kEmbedTokens, kEmbedTokens);
}

}  // namespace shardwise::models::detail

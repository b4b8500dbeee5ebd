#include "shardwise/models/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "detail/gpt_layout.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/embedding.hpp"
#include "shardwise/kernels/layernorm.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/train/chunk_inputs.hpp"
#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/train/placement.hpp"

namespace shardwise::models {
namespace {

using namespace detail;  // the parameters' order
using train::ParameterSpec;

void zero(std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0F); }

}  // namespace

Gpt::Gpt(GptConfig config, train::ParameterStore& store, train::TensorParallel tensor_parallel,
         bool sequence_parallel, std::optional<GptStageRange> range)
    : config_(config),
      range_(range ? *range : GptStageRange{0, config.n_layer}),
      store_(store),
      tp_(tensor_parallel),
      sequence_parallel_(sequence_parallel) {
  if (sequence_parallel_ && tp_.degree() == 1) {
    throw InvalidArgument(
        "sequence parallelism splits the sequence over the model axis; the mesh has none");
  }
  has_head_ = range_.has_last(config_.n_layer);
  const auto t = static_cast<std::size_t>(tp_.degree());
  index_ = train::chunk_parameter_indices(GptDefinition(config_), store_, range_, tp_.degree());
  channels_ = config_.n_embd / t;
  heads_ = config_.n_head / t;
  width_ = 4 * config_.n_embd / t;
  vocab_ = config_.vocab_size / t;
  vocab_start_ = static_cast<std::size_t>(tp_.rank()) * vocab_;
}

std::size_t Gpt::Activations::bytes() const {
  std::size_t floats = 0;
  for (const auto* v :
       {&encoded, &ln1, &ln1_mean, &ln1_rstd, &qkv, &atty, &lse, &residual2, &ln2, &ln2_mean,
        &ln2_rstd, &fch, &fch_gelu, &residual3, &lnf, &lnf_mean, &lnf_rstd, &losses}) {
    floats += v->size();
  }
  return floats * sizeof(float);
}

Gpt::Activations& Gpt::slot(std::size_t index) {
  while (slots_.size() <= index) slots_.push_back(std::make_unique<Activations>());
  return *slots_[index];
}

void Gpt::size_activations(Activations& a, std::size_t batch, std::size_t seq) {
  if (batch == a.batch && seq == a.seq) return;
  a.batch = batch;
  a.seq = seq;
  // Under tensor parallelism the widths inside attention, the MLP and the head are this
  // rank's: channels_ (C / t), width_ (4C / t), vocab_ (V / t). Under sequence parallelism the
  // residual stream, the LayerNorms' statistics and the row-parallel outputs hold this rank's
  // positions only (R rows of the BT); the LayerNorms' gathered outputs are whole. A stage
  // keeps its own layers' activations, and the head's only where it has the head.
  const std::size_t L = layers(), C = config_.n_embd, BT = batch * seq;
  const std::size_t R = local_rows(batch, seq);
  a.encoded.assign(R * C, 0);
  a.residual3.assign(L * R * C, 0);
  // Full recomputation keeps each layer's output only; one layer's scratch holds the rest.
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
  a.lnf.assign(head * BT * C, 0);
  a.lnf_mean.assign(head * R, 0);
  a.lnf_rstd.assign(head * R, 0);
  a.losses.assign(head * BT, 0);
}

void Gpt::size_layers(Activations& a, std::size_t layers, std::size_t batch,
                      std::size_t seq) const {
  const std::size_t C = config_.n_embd, BT = batch * seq, R = local_rows(batch, seq);
  for (auto* v : {&a.ln1, &a.ln2}) v->assign(layers * BT * C, 0);
  a.residual2.assign(layers * R * C, 0);
  a.atty.assign(layers * BT * channels_, 0);
  for (auto* v : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) v->assign(layers * R, 0);
  a.qkv.assign(layers * BT * 3 * channels_, 0);
  a.lse.assign(layers * batch * heads_ * seq, 0);  // each row's log-sum-exp: no seq x seq matrix
  a.fch.assign(layers * BT * width_, 0);
  a.fch_gelu.assign(layers * BT * width_, 0);
}

void Gpt::size_scratch(std::size_t batch, std::size_t seq) {
  if (batch == scratch_batch_ && seq == scratch_seq_) return;
  scratch_batch_ = batch;
  scratch_seq_ = seq;
  const std::size_t C = config_.n_embd, BT = batch * seq, R = local_rows(batch, seq);
  for (auto* v : {&dresidual_, &projected_}) v->assign(R * C, 0);
  dnorm_.assign(BT * C, 0);
  dbranch_.assign(BT * channels_, 0);
  dwide_.assign(BT * width_, 0);
  dwide_gelu_.assign(BT * width_, 0);
  dqkv_.assign(BT * 3 * channels_, 0);
  // The head runs a block of rows at a time: one block's logits, probabilities and their
  // gradient, never the batch's.
  const std::size_t block = has_head_ ? train::head_block_rows(BT, vocab_) : 0;
  for (auto* v : {&logits_, &probs_, &dlogits_}) v->assign(block * vocab_, 0);
  if (sequence_parallel_) {
    dnorm_local_.assign(R * C, 0);
    norm_local_.assign(R * C, 0);
    partial_.assign(BT * C, 0);
    dfull_.assign(BT * C, 0);
  }
}

std::size_t Gpt::local_rows(std::size_t batch, std::size_t seq) const {
  return sequence_parallel_ ? batch * seq / static_cast<std::size_t>(tp_.degree()) : batch * seq;
}

std::size_t Gpt::boundary_elements(std::size_t batch, std::size_t seq) const {
  return local_rows(batch, seq) * config_.n_embd;
}

std::size_t Gpt::activation_bytes() const {
  std::size_t bytes = recomputed_.bytes();
  for (const auto& a : slots_) bytes += a->bytes();
  std::size_t floats = 0;
  for (const auto* v :
       {&dresidual_, &dbranch_, &dwide_, &dwide_gelu_, &dnorm_, &dqkv_, &logits_, &probs_,
        &dlogits_, &projected_, &dnorm_local_, &norm_local_, &partial_, &dfull_}) {
    floats += v->size();
  }
  return bytes + floats * sizeof(float);
}

train::ChunkLimits Gpt::limits() const {
  return {range_, config_.n_layer, config_.block_size, config_.vocab_size,
          sequence_parallel_ ? tp_.degree() : 1};
}

float Gpt::forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                   std::size_t batch, std::size_t seq, bool backward_follows) {
  if (!(range_ == GptStageRange{0, config_.n_layer})) {
    throw InvalidArgument("forward() runs the whole model; this object runs layers " +
                          std::to_string(range_.first_layer) + " to " +
                          std::to_string(range_.end_layer) + " (forward_stage)");
  }
  return forward_stage(0, tokens, targets, batch, seq, {}, {}, backward_follows);
}

void Gpt::backward(const train::GradientsReady& ready) { backward_stage(0, {}, {}, 1.0F, ready); }

float Gpt::forward_stage(std::size_t slot_index, std::span<const std::int32_t> tokens,
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
  const std::size_t C = config_.n_embd;
  const std::size_t BT = batch * seq, R = local_rows(batch, seq);
  act.head_held = false;
  if (!range_.has_first()) {
    std::copy(input.begin(), input.end(), act.encoded.begin());
  } else {
    // Each unit is gathered just before its use and released after (no-ops unless a ZeRO-3
    // trainer has sharded the store).
    store_.gather(embeddings_unit());
    if (!sequence_parallel_) {
      tp_.embedding_forward(act.encoded.data(), act.tokens.data(), store_.value(index_[kWte]),
                            store_.value(index_[kWpe]), batch, seq, C, vocab_start_, vocab_);
    } else {
      // Each rank's rows of the token embedding, summed and scattered along the sequence; then
      // the positions this rank holds.
      tp_.lookup(partial_.data(), act.tokens.data(), store_.value(index_[kWte]), BT, C,
                 vocab_start_, vocab_);
      tp_.reduce_scatter_sequence(act.encoded.data(), partial_.data(), batch, seq, C);
      const std::size_t positions = seq / static_cast<std::size_t>(tp_.degree());
      const float* wpe =
          store_.value(index_[kWpe]) + static_cast<std::size_t>(tp_.rank()) * positions * C;
      for (std::size_t r = 0; r < R; ++r) {
        for (std::size_t c = 0; c < C; ++c) act.encoded[r * C + c] += wpe[(r % positions) * C + c];
      }
    }
    store_.release(embeddings_unit());
  }
  const float* residual = act.encoded.data();
  for (std::size_t i = 0; i < layers(); ++i) {
    const std::size_t l = range_.first_layer + i;
    const LayerActivations a = layer(act, i);
    store_.gather(layer_unit(l));
    layer_forward(a, residual, l, batch, seq);
    store_.release(layer_unit(l));
    residual = a.residual3;
  }
  if (!has_head_) {
    std::copy(residual, residual + boundary, output.begin());
    return 0;
  }
  const std::size_t last = 2 + config_.n_layer * kPerLayer;
  store_.gather(final_norm_unit());
  store_.gather(embeddings_unit());
  norm_forward(act.lnf.data(), act.lnf_mean.data(), act.lnf_rstd.data(), residual,
               store_.value(index_[last]), store_.value(index_[last + 1]), batch, seq);
  // The output head is the token embedding (tied weights): this rank's logits are those of
  // its rows of the vocabulary, a block of rows at a time; only each row's loss is kept.
  const std::size_t block = train::head_block_rows(BT, vocab_);
  for (std::size_t r0 = 0; r0 < BT; r0 += block) {
    const std::size_t rows = std::min(block, BT - r0);
    kernels::matmul_forward(logits_.data(), act.lnf.data() + r0 * C, store_.value(index_[kWte]),
                            nullptr, rows, C, vocab_);
    tp_.cross_entropy_forward(act.losses.data() + r0, probs_.data(), logits_.data(),
                              act.targets.data() + r0, rows, vocab_, vocab_start_);
  }
  // Backward starts with the head and the final norm: where it follows, they stay gathered.
  if (backward_follows) {
    act.head_held = true;
  } else {
    store_.release(embeddings_unit());
    store_.release(final_norm_unit());
  }
  double sum = 0;
  for (float loss : act.losses) sum += loss;
  return static_cast<float>(sum / static_cast<double>(BT));
}

Gpt::LayerActivations Gpt::layer(Activations& a, std::size_t l) {
  // The LayerNorms' outputs, Q, K and V, attention and the MLP's inside are whole (BT rows);
  // the statistics, the row-parallel outputs and the residual stream are this rank's R rows.
  const std::size_t C = config_.n_embd, BT = a.batch * a.seq, R = local_rows(a.batch, a.seq);
  float* const output = a.residual3.data() + l * R * C;
  // Under full recomputation a layer keeps its output only: the rest is the one layer's scratch.
  Activations& kept = recompute_ == Recompute::kFull ? recomputed_ : a;
  const std::size_t k = recompute_ == Recompute::kFull ? 0 : l;
  return {kept.ln1.data() + k * BT * C,
          kept.ln1_mean.data() + k * R,
          kept.ln1_rstd.data() + k * R,
          kept.qkv.data() + k * BT * 3 * channels_,
          kept.atty.data() + k * BT * channels_,
          kept.lse.data() + k * a.batch * heads_ * a.seq,
          projected_.data(),
          kept.residual2.data() + k * R * C,
          kept.ln2.data() + k * BT * C,
          kept.ln2_mean.data() + k * R,
          kept.ln2_rstd.data() + k * R,
          kept.fch.data() + k * BT * width_,
          kept.fch_gelu.data() + k * BT * width_,
          projected_.data(),
          output};
}

float* Gpt::param(std::size_t layer, std::size_t which) {
  return store_.value(index_[2 + layer * kPerLayer + which]);
}

void Gpt::set_recompute(Recompute recompute) {
  if (!slots_.empty()) {
    throw InvalidArgument("the recomputation mode is set before the first forward");
  }
  recompute_ = recompute;
}

void Gpt::norm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.n_embd, R = local_rows(batch, seq);
  float* local = sequence_parallel_ ? norm_local_.data() : out;
  kernels::layernorm_forward(local, mean, rstd, inp, weight, bias, R, C);
  if (sequence_parallel_) tp_.gather_sequence(out, local, batch, seq, C);
}

void Gpt::residual_norm_forward(float* sum, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias,
                                std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.n_embd, R = local_rows(batch, seq);
  float* local = sequence_parallel_ ? norm_local_.data() : out;
  kernels::residual_layernorm_forward(sum, local, mean, rstd, a, b, weight, bias, R, C);
  if (sequence_parallel_) tp_.gather_sequence(out, local, batch, seq, C);
}

void Gpt::row_parallel(float* out, const float* inp, const float* weight, const float* bias,
                       std::size_t in_local, std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.n_embd, BT = batch * seq, R = local_rows(batch, seq);
  if (!sequence_parallel_) {
    tp_.row_parallel_forward(out, inp, weight, bias, BT, in_local, C);
    return;
  }
  kernels::matmul_forward(partial_.data(), inp, weight, nullptr, BT, in_local, C);
  tp_.reduce_scatter_sequence(out, partial_.data(), batch, seq, C);
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t c = 0; c < C; ++c) out[r * C + c] += bias[c];
  }
}

void Gpt::layer_forward(const LayerActivations& a, const float* residual, std::size_t l,
                        std::size_t batch, std::size_t seq) {
  const std::size_t C = config_.n_embd, Cl = channels_, W = width_;
  const std::size_t BT = batch * seq, R = local_rows(batch, seq);
  norm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, residual, param(l, kLn1W), param(l, kLn1B), batch,
               seq);
  // Column-parallel Q, K and V of this rank's heads; row-parallel output projection.
  kernels::matmul_forward(a.qkv, a.ln1, param(l, kQkvW), param(l, kQkvB), BT, C, 3 * Cl);
  kernels::attention_forward(a.atty, a.lse, a.qkv, batch, seq, Cl, heads_);
  row_parallel(a.attproj, a.atty, param(l, kAttProjW), param(l, kAttProjB), Cl, batch, seq);
  residual_norm_forward(a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, residual, a.attproj,
                        param(l, kLn2W), param(l, kLn2B), batch, seq);
  kernels::matmul_forward(a.fch, a.ln2, param(l, kFcW), param(l, kFcB), BT, C, W);
  kernels::gelu_forward(a.fch_gelu, a.fch, BT * W);
  row_parallel(a.fcproj, a.fch_gelu, param(l, kFcProjW), param(l, kFcProjB), W, batch, seq);
  kernels::residual_forward(a.residual3, a.residual2, a.fcproj, R * C);
}

std::size_t Gpt::embeddings_unit() const { return store_.unit_of(index_[kWte]); }
std::size_t Gpt::layer_unit(std::size_t l) const {
  return store_.unit_of(index_[2 + l * kPerLayer]);
}
std::size_t Gpt::final_norm_unit() const {
  return store_.unit_of(index_[2 + config_.n_layer * kPerLayer]);
}

void Gpt::backward_stage(std::size_t slot_index, std::span<const float> output_grad,
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
  const std::size_t C = config_.n_embd, Cl = channels_, W = width_;
  const std::size_t BT = batch * seq, R = local_rows(batch, seq);
  const auto param = [&](std::size_t layer, std::size_t which) {
    return store_.value(index_[2 + layer * kPerLayer + which]);
  };
  const auto grad = [&](std::size_t layer, std::size_t which) {
    return store_.grad(index_[2 + layer * kPerLayer + which]);
  };
  // A column-parallel layer's input gradient (dnorm_, whole, this rank's part): summed over the
  // model axis; this rank's rows of it (reduce-scattered along the sequence under sequence
  // parallelism).
  const auto column_input_grad = [&]() -> const float* {
    if (!sequence_parallel_) {
      tp_.sum(dnorm_.data(), BT * C);
      return dnorm_.data();
    }
    tp_.reduce_scatter_sequence(dnorm_local_.data(), dnorm_.data(), batch, seq, C);
    return dnorm_local_.data();
  };
  // A row-parallel layer's output gradient, whole (gathered along the sequence under sequence
  // parallelism).
  const auto whole_output_grad = [&](const float* local) -> const float* {
    if (!sequence_parallel_) return local;
    tp_.gather_sequence(dfull_.data(), local, batch, seq, C);
    return dfull_.data();
  };
  // A LayerNorm's backward over this rank's rows. Under sequence parallelism its parameters'
  // gradients come from this rank's positions only: they are summed over the model axis (in a
  // scratch first, so that only this pass's part is summed).
  std::vector<float> norm_grads(sequence_parallel_ ? 2 * C : 0);
  const auto layernorm_backward = [&](float* dinp, float* dweight, float* dbias, const float* dout,
                                      const float* inp, const float* weight, const float* mean,
                                      const float* rstd) {
    if (!sequence_parallel_) {
      kernels::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, R, C);
      return;
    }
    std::fill(norm_grads.begin(), norm_grads.end(), 0.0F);
    kernels::layernorm_backward(dinp, norm_grads.data(), norm_grads.data() + C, dout, inp, weight,
                                mean, rstd, R, C);
    tp_.sum(norm_grads.data(), 2 * C);
    for (std::size_t c = 0; c < C; ++c) {
      dweight[c] += norm_grads[c];
      dbias[c] += norm_grads[C + c];
    }
  };
  // The range of parameters [first, last] (store indices, contiguous in gpt_parameters order).
  const auto tell = [&](std::size_t first, std::size_t last_index) {
    if (!ready) return;
    ready(store_.offset(index_[first]),
          store_.offset(index_[last_index]) + store_.count(index_[last_index]));
  };
  const std::size_t L = layers();
  if (!has_head_) {
    std::copy(output_grad.begin(), output_grad.end(), dresidual_.begin());
  } else {
    const std::size_t last = 2 + config_.n_layer * kPerLayer;
    if (!std::exchange(act.head_held, false)) {
      store_.gather(final_norm_unit());
      store_.gather(embeddings_unit());
    }
    // The mean loss: every row's loss counts loss_scale / BT. A block of rows at a time, its
    // logits and probabilities computed again (the same values as in forward), then their
    // gradient through the head.
    const std::size_t block = train::head_block_rows(BT, vocab_);
    const std::vector<float> dlosses(block, loss_scale / static_cast<float>(BT));
    std::vector<float> losses(block);
    for (std::size_t r0 = 0; r0 < BT; r0 += block) {
      const std::size_t rows = std::min(block, BT - r0);
      const float* lnf = act.lnf.data() + r0 * C;
      kernels::matmul_forward(logits_.data(), lnf, store_.value(index_[kWte]), nullptr, rows, C,
                              vocab_);
      tp_.cross_entropy_forward(losses.data(), probs_.data(), logits_.data(),
                                act.targets.data() + r0, rows, vocab_, vocab_start_);
      std::fill(dlogits_.begin(), dlogits_.begin() + static_cast<std::ptrdiff_t>(rows * vocab_),
                0.0F);
      tp_.cross_entropy_backward(dlogits_.data(), dlosses.data(), probs_.data(),
                                 act.targets.data() + r0, rows, vocab_, vocab_start_);
      // Each block writes its own rows of the input's gradient: nothing to zero first.
      kernels::matmul_backward(dnorm_.data() + r0 * C, store_.grad(index_[kWte]), nullptr,
                               dlogits_.data(), lnf, store_.value(index_[kWte]), rows, C, vocab_,
                               kernels::InputGradient::kOverwrite);
    }
    const float* dlnf = column_input_grad();  // each rank's vocabulary adds its part
    store_.release(embeddings_unit());        // its gradients stay until the embedding's backward
    const float* top = L > 0 ? act.residual3.data() + (L - 1) * R * C : act.encoded.data();
    zero(dresidual_);
    layernorm_backward(dresidual_.data(), store_.grad(index_[last]), store_.grad(index_[last + 1]),
                       dlnf, top, store_.value(index_[last]), act.lnf_mean.data(),
                       act.lnf_rstd.data());
    tell(last, last + 1);
    store_.release(final_norm_unit());
  }
  // dresidual_ holds d(the residual stream after layer l) on entry to each iteration, and
  // d(before layer l) after it (this rank's rows).
  for (std::size_t i = L; i-- > 0;) {
    const std::size_t l = range_.first_layer + i;
    const float* residual = i == 0 ? act.encoded.data() : act.residual3.data() + (i - 1) * R * C;
    const LayerActivations a = layer(act, i);
    store_.gather(layer_unit(l));
    // Full recomputation: the layer's forward again, into the scratch, with the unit gathered
    // once for it and its backward.
    if (recompute_ == Recompute::kFull) layer_forward(a, residual, l, batch, seq);
    // residual3 = residual2 + fcproj: both get dresidual. One buffer holds it, and then, the
    // LayerNorm's gradient added in place once the MLP's product has read it, d(residual2).
    const float* dmlp = whole_output_grad(dresidual_.data());
    // The products write the scratch gradients rather than add to zeroed ones.
    kernels::matmul_backward(dwide_gelu_.data(), grad(l, kFcProjW), grad(l, kFcProjB), dmlp,
                             a.fch_gelu, param(l, kFcProjW), BT, W, C,
                             kernels::InputGradient::kOverwrite);
    kernels::gelu_backward(dwide_.data(), a.fch, dwide_gelu_.data(), BT * W,
                           kernels::InputGradient::kOverwrite);
    kernels::matmul_backward(dnorm_.data(), grad(l, kFcW), grad(l, kFcB), dwide_.data(), a.ln2,
                             param(l, kFcW), BT, C, W, kernels::InputGradient::kOverwrite);
    layernorm_backward(dresidual_.data(), grad(l, kLn2W), grad(l, kLn2B), column_input_grad(),
                       a.residual2, param(l, kLn2W), a.ln2_mean, a.ln2_rstd);
    // residual2 = residual + attproj: both get d(residual2); the first LayerNorm's gradient is
    // added in place the same way.
    const float* dattention = whole_output_grad(dresidual_.data());
    kernels::matmul_backward(dbranch_.data(), grad(l, kAttProjW), grad(l, kAttProjB), dattention,
                             a.atty, param(l, kAttProjW), BT, Cl, C,
                             kernels::InputGradient::kOverwrite);
    kernels::attention_backward(dqkv_.data(), dbranch_.data(), a.qkv, a.atty, a.lse, batch, seq, Cl,
                                heads_, kernels::InputGradient::kOverwrite);
    kernels::matmul_backward(dnorm_.data(), grad(l, kQkvW), grad(l, kQkvB), dqkv_.data(), a.ln1,
                             param(l, kQkvW), BT, C, 3 * Cl, kernels::InputGradient::kOverwrite);
    layernorm_backward(dresidual_.data(), grad(l, kLn1W), grad(l, kLn1B), column_input_grad(),
                       residual, param(l, kLn1W), a.ln1_mean, a.ln1_rstd);
    tell(2 + l * kPerLayer, 2 + l * kPerLayer + kPerLayer - 1);
    store_.release(layer_unit(l));
  }
  if (!range_.has_first()) {
    std::copy(dresidual_.begin(), dresidual_.end(), input_grad.begin());
    return;
  }
  if (!sequence_parallel_) {
    tp_.embedding_backward(store_.grad(index_[kWte]), store_.grad(index_[kWpe]), dresidual_.data(),
                           act.tokens.data(), batch, seq, C, vocab_start_, vocab_);
  } else {
    // The positions this rank holds, summed over the axis (in a scratch: this pass's part);
    // the token embedding's rows from the whole gradient.
    const std::size_t positions = seq / static_cast<std::size_t>(tp_.degree());
    const std::size_t first = static_cast<std::size_t>(tp_.rank()) * positions;
    std::vector<float> dpositions(seq * C, 0.0F);
    for (std::size_t r = 0; r < R; ++r) {
      for (std::size_t c = 0; c < C; ++c) {
        dpositions[(first + r % positions) * C + c] += dresidual_[r * C + c];
      }
    }
    tp_.sum(dpositions.data(), dpositions.size());
    float* dwpe = store_.grad(index_[kWpe]);
    for (std::size_t i = 0; i < dpositions.size(); ++i) dwpe[i] += dpositions[i];
    tp_.lookup_backward(store_.grad(index_[kWte]), whole_output_grad(dresidual_.data()),
                        act.tokens.data(), BT, C, vocab_start_, vocab_);
  }
  tell(kWte, kWpe);
}

GptModel::GptModel(const GptConfig& config, std::uint64_t seed)
    : DistributedModel(std::make_shared<GptDefinition>(config), seed) {}

GptModel::GptModel(const GptConfig& config, std::uint64_t seed,
                   const train::ParallelContext& context,
                   const std::optional<std::vector<PartitionSpec>>& placements,
                   bool sequence_parallel, std::optional<GptPipeline> pipeline)
    : DistributedModel(std::make_shared<GptDefinition>(config), seed, context,
                       {placements.value_or(std::vector<PartitionSpec>{}), sequence_parallel,
                        Recompute::kNone, std::move(pipeline)}) {}

void GptModel::set_recompute(Recompute recompute) {
  for (const auto& chunk : chunks()) static_cast<Gpt&>(*chunk).set_recompute(recompute);
}

}  // namespace shardwise::models

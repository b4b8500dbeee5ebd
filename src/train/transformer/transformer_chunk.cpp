#include "transformer_chunk.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/moe_router.hpp"

namespace shardwise::train::transformer {
namespace {

LayerRange whole_if_empty(const LayerRange& range, std::size_t layers) {
  return range.end_layer == 0 ? LayerRange{0, layers} : range;
}

ElementTypes chunk_types(const ChunkOptions& options) {
  const DType stream = options.residual_dtype;
  if (stream != DType::kF32 && stream != DType::kBF16) {
    throw InvalidArgument("residual_dtype is " + shardwise::to_string(stream) +
                          "; the residual stream is kept in fp32 or bf16");
  }
  if (options.precision != Precision::kBf16) {
    if (stream != DType::kF32) {
      throw InvalidArgument("residual_dtype is " + float_dtype_name(stream) + " under " +
                            to_string(options.precision) +
                            " precision; a bf16 residual stream needs bf16 precision");
    }
    return ElementTypes::fp32();
  }
  return ElementTypes::bf16_compute(stream);
}

}  // namespace

TransformerChunk::TransformerChunk(const TransformerSpec& spec, const ModelDefinition& model,
                                   ParameterStore& store, const ChunkOptions& options)
    : spec_(spec),
      places_(parameter_layout(spec.shape)),
      range_(whole_if_empty(options.range, spec.shape.layers)),
      store_(store),
      types_(chunk_types(options)),
      sequence_parallel_(options.sequence_parallel),
      recompute_(options.recompute),
      axis_(options.tensor_parallel, options.sequence_parallel, spec.shape.hidden,
            options.precision, options.precision == Precision::kBf16 ? DType::kBF16 : DType::kF32),
      experts_(options.expert_parallel),
      sum_over_batch_(options.sum_over_batch),
      batch_ranks_(std::max<std::size_t>(options.batch_ranks, 1)),
      norm_(spec.shape.norm, static_cast<float>(spec.norm_eps), axis_, types_.stream_narrower()),
      attention_(spec_, axis_),
      mlp_(spec.shape, axis_, experts_, options.capacity_factor),
      embedding_(spec.shape, axis_),
      head_(norm_, axis_, embedding_.vocab_local(), embedding_.vocab_start()) {
  const TensorParallel& tp = options.tensor_parallel;
  if (sequence_parallel_ && tp.degree() == 1) {
    throw InvalidArgument(
        "sequence parallelism splits the sequence over the model axis; the mesh has none");
  }
  has_head_ = range_.has_last(spec_.shape.layers);
  if (!(spec_.aux_loss_weight >= 0)) {
    throw InvalidArgument("aux_loss_weight is " + std::to_string(spec_.aux_loss_weight) +
                          "; expected a weight of 0 or more");
  }
  if (spec_.aux_loss_weight > 0 && (!spec_.shape.moe() || !range_.has_first() || !has_head_)) {
    throw InvalidArgument(
        spec_.shape.moe()
            ? "an auxiliary load-balancing loss (output_router_logits) couples every layer's "
              "routing of a micro-batch; a pipeline splits the layers over stages, which "
              "shardwise does not run with it"
            : "an auxiliary load-balancing loss on a model without experts");
  }
  index_ = chunk_parameter_indices(model, store_, range_, tp.degree(), experts_.axis_degree());
  if (!(options.expert_bias_rate >= 0 && options.expert_bias_rate <= 1e6)) {
    throw InvalidArgument("expert_bias_rate is " + std::to_string(options.expert_bias_rate) +
                          "; expected 0 (no expert bias) or a rate up to 1e6");
  }
  if (options.expert_bias_rate > 0) {
    if (!spec_.shape.moe()) {
      throw InvalidArgument("an expert bias on a model without experts");
    }
    expert_bias_.assign(layers() * spec_.shape.experts, 0.0F);
    expert_counts_.assign(expert_bias_.size(), 0.0);
  }
  // (The table refuses a degree that does not divide the heads, the MLP or the vocabulary.)
  // Whether attention's gradients fit the MLP's dead arrays depends on the widths alone.
  attention_grads_in_mlp_ =
      table(1, static_cast<std::size_t>(tp.degree())).attention_grads_in_mlp();
  if (attention_.replicated_kv()) {
    // The store's rows of each key/value projection must be the head this rank's queries read.
    const auto first_row = static_cast<std::int64_t>(attention_.replicated_kv_first_row());
    const std::size_t per_projection = spec_.shape.qkv_bias ? 2 : 1;
    for (std::size_t l = range_.first_layer; l < range_.end_layer; ++l) {
      const std::size_t attention = places_.layer_first(l) + places_.norm;
      for (const std::size_t which : {per_projection, 2 * per_projection}) {
        const ParameterSpec& held = store_.specs()[index_[attention + which]];
        if (held.block.empty() || held.block[0].start != first_row) {
          throw InvalidArgument(
              "parameter '" + held.name + "' holds rows " +
              (held.block.empty() ? std::string("all") : shardwise::to_string(held.block)) +
              " on model rank " + std::to_string(tp.rank()) + "; its queries read rows [" +
              std::to_string(first_row) + ", " +
              std::to_string(first_row + static_cast<std::int64_t>(spec_.shape.head_dim)) + ")");
        }
      }
    }
  }
}

ActivationTable TransformerChunk::table(std::size_t batch, std::size_t seq) const {
  ChunkGeometry geometry;
  geometry.batch = batch;
  geometry.seq = seq;
  geometry.model_degree = static_cast<std::size_t>(axis_.tp().degree());
  geometry.expert_degree = spec_.shape.moe() ? static_cast<std::size_t>(experts_.degree()) : 1;
  geometry.sequence_parallel = sequence_parallel_;
  geometry.recompute = recompute_;
  geometry.layers = layers();
  geometry.has_head = has_head_;
  geometry.rounded_products = axis_.products().precision() == Precision::kBf16;
  geometry.narrow_stream = types_.stream_narrower();
  return ActivationTable(spec_.shape, geometry);
}

Rows TransformerChunk::rows(std::size_t batch, std::size_t seq) const {
  const std::size_t whole = batch * seq;
  const std::size_t local =
      sequence_parallel_ ? whole / static_cast<std::size_t>(axis_.tp().degree()) : whole;
  return {batch, seq, whole, local};
}

std::size_t TransformerChunk::boundary_elements(std::size_t batch, std::size_t seq) const {
  return rows(batch, seq).local * spec_.shape.hidden;
}

ChunkLimits TransformerChunk::limits() const {
  return {range_, spec_.shape.layers, spec_.shape.context, spec_.shape.vocab,
          sequence_parallel_ ? axis_.tp().degree() : 1};
}

void TransformerChunk::size_slot(Slot& slot, std::size_t batch, std::size_t seq) {
  if (batch == slot.batch && seq == slot.seq) return;
  slot.batch = batch;
  slot.seq = seq;
  slot.table = table(batch, seq);
  const ActivationTable& t = *slot.table;
  const bool full = recompute_ == Recompute::kFull;
  const std::size_t L = layers();
  for (std::size_t i = 0; i < kActivationCount; ++i) {
    const auto a = static_cast<Activation>(i);
    std::size_t count = 0;
    switch (lifetime_of(a)) {
      case Lifetime::kLayer: count = full ? 0 : L * t.elements(a); break;
      case Lifetime::kLayerOutput: count = L * t.elements(a); break;
      case Lifetime::kMicroBatch: count = t.elements(a); break;
      case Lifetime::kScratch: break;
    }
    slot.arrays[i].assign(count, element_type_of(a, types_));
  }
  // The working layer: under full recomputation the one layer recomputed (each layer keeps its
  // output only); where layers keep bf16, the float32 arrays each is computed in.
  if (working_batch_ != batch || working_seq_ != seq) {
    working_batch_ = batch;
    working_seq_ = seq;
    for (std::size_t i = 0; i < kActivationCount; ++i) {
      const auto a = static_cast<Activation>(i);
      const Lifetime lifetime = lifetime_of(a);
      const bool of_layer = lifetime == Lifetime::kLayer || lifetime == Lifetime::kLayerOutput;
      const bool held =
          L > 0 && of_layer && ((full && lifetime == Lifetime::kLayer) || kept_rounded(a, types_));
      working_[i].assign(held ? t.elements(a) : 0, working_type_of(a, types_));
    }
  }
}

void TransformerChunk::size_scratch(std::size_t batch, std::size_t seq) {
  if (batch == scratch_batch_ && seq == scratch_seq_) return;
  scratch_batch_ = batch;
  scratch_seq_ = seq;
  const ActivationTable t = table(batch, seq);
  for (std::size_t i = 0; i < kActivationCount; ++i) {
    const auto a = static_cast<Activation>(i);
    scratch_[i].assign(lifetime_of(a) == Lifetime::kScratch ? t.elements(a) : 0,
                       element_type_of(a, types_));
  }
  axis_.use({scratch(Activation::kNormLocal), scratch(Activation::kNormGradLocal),
             scratch(Activation::kPartialSum), scratch(Activation::kGathered),
             scratch(Activation::kNormParameterGrads)});
  const auto rounding = [&](Activation a) {
    return std::span<BFloat16>(scratch_[static_cast<std::size_t>(a)].bf16(), t.elements(a));
  };
  axis_.products().use_rounding_buffers(rounding(Activation::kRoundedInput),
                                        rounding(Activation::kRoundedOutputGrad));
}

TransformerChunk::Layer TransformerChunk::layer(Slot& slot, std::size_t i) {
  const ActivationTable& t = *slot.table;
  const bool full = recompute_ == Recompute::kFull;
  Layer layer;
  for (std::size_t k = 0; k < kActivationCount; ++k) {
    const auto a = static_cast<Activation>(k);
    const std::size_t e = t.elements(a);
    layer.count[k] = e;
    if (lifetime_of(a) == Lifetime::kLayerOutput) {
      // Kept under every recomputation; a narrow stream's computed in the working layer.
      if (kept_rounded(a, types_)) {
        layer.at[k] = working_[k].f32();
        layer.kept[k] = slot.arrays[k].bf16() + i * e;
      } else {
        layer.at[k] = slot.arrays[k].f32() + i * e;
      }
    } else if (lifetime_of(a) == Lifetime::kLayer) {
      if (full) {
        layer.at[k] = working_[k].f32();
      } else if (kept_rounded(a, types_)) {
        layer.at[k] = working_[k].f32();
        layer.kept[k] = slot.arrays[k].bf16() + i * e;
      } else {
        layer.at[k] = slot.arrays[k].f32() + i * e;
      }
    }
  }
  return layer;
}

const float* TransformerChunk::stream_input(Slot& slot, std::size_t i) {
  const auto in = static_cast<std::size_t>(i == 0 ? Activation::kInput : Activation::kLayerOutput);
  const std::size_t count = slot.table->elements(static_cast<Activation>(in));
  const std::size_t offset = i == 0 ? 0 : (i - 1) * count;
  if (!types_.stream_narrower()) return slot.arrays[in].f32() + offset;
  float* const widened = scratch(Activation::kStreamInput);
  kernels::to_float(std::span<const BFloat16>(slot.arrays[in].bf16() + offset, count),
                    std::span<float>(widened, count));
  return widened;
}

std::vector<KeptArray> TransformerChunk::kept_arrays(const Layer& layer) {
  std::vector<KeptArray> arrays;
  for (std::size_t k = 0; k < kActivationCount; ++k) {
    if (layer.kept[k] == nullptr || layer.count[k] == 0) continue;
    arrays.push_back(
        {name_of(static_cast<Activation>(k)), layer.at[k], layer.kept[k], layer.count[k]});
  }
  return arrays;
}

ModelChunk::ExpertRows TransformerChunk::expert_rows() const {
  const MoePart* moe = mlp_.moe();
  return moe == nullptr ? ExpertRows{}
                        : ExpertRows{moe->routed_rows(), moe->computed_rows(), moe->dropped_rows()};
}

std::size_t TransformerChunk::activation_bytes() const {
  std::size_t bytes = 0;
  const auto add = [&](const Arrays& arrays) {
    for (const auto& v : arrays) bytes += v.bytes.size();
  };
  for (const auto& slot : slots_) add(slot->arrays);
  add(working_);
  add(scratch_);
  // The rows an expert axis brought this rank's experts, kept outside the table: the most held.
  if (const MoePart* moe = mlp_.moe()) bytes += moe->peak_expert_bytes();
  return bytes;
}

void TransformerChunk::finish_auxiliary_loss(Slot& slot, const Rows& rw) {
  // transformers' load_balancing_loss_func over every layer's rows of the whole batch: the
  // statistics of every rank's share summed, then the loss of their means.
  const std::size_t E = spec_.shape.experts;
  if (sum_over_batch_) sum_over_batch_(slot.routing.data(), slot.routing.size());
  // transformers concatenates the routed layers' logits: the dense layers have none.
  const double rows = static_cast<double>(spec_.shape.moe_layers(0, spec_.shape.layers)) *
                      static_cast<double>(rw.whole) * static_cast<double>(batch_ranks_);
  slot.aux_loss = static_cast<float>(
      spec_.aux_loss_weight *
      kernels::load_balancing_loss(slot.routing.data(), slot.routing.data() + E, E, rows));
  // Each rank's gradient is averaged over the batch's ranks: its share counts batch_ranks times.
  slot.aux_gradient.resize(E);
  kernels::load_balancing_gradient(slot.aux_gradient.data(), slot.routing.data(), E, rows,
                                   spec_.aux_loss_weight * static_cast<double>(batch_ranks_));
}

float TransformerChunk::auxiliary_loss(std::size_t slot) const {
  return slot < slots_.size() ? slots_[slot]->aux_loss : 0.0F;
}

void TransformerChunk::gather_head() {
  store_.gather(unit(places_.final_norm()));
  if (spec_.shape.tied_head) store_.gather(unit(0));
}

void TransformerChunk::release_head() {
  if (spec_.shape.tied_head) store_.release(unit(0));
  store_.release(unit(places_.final_norm()));
}

void TransformerChunk::tell(const GradientsReady& ready, std::size_t first,
                            std::size_t last) const {
  if (!ready) return;
  ready(store_.offset(index_[first]), store_.offset(index_[last]) + store_.count(index_[last]));
}

AttentionPart::Arrays TransformerChunk::attention_arrays(const Layer& a) {
  return {a[Activation::kProjections], a[Activation::kQkNormInput],
          a[Activation::kQkNormStatistics], a[Activation::kAttention], a[Activation::kLogSumExp]};
}

const float* TransformerChunk::layer_bias(std::size_t l) const {
  return expert_bias_.empty()
             ? nullptr
             : expert_bias_.data() + (l - range_.first_layer) * spec_.shape.experts;
}

double* TransformerChunk::layer_counts(std::size_t l) {
  return expert_counts_.empty()
             ? nullptr
             : expert_counts_.data() + (l - range_.first_layer) * spec_.shape.experts;
}

void TransformerChunk::layer_forward(const Layer& a, const float* residual, std::size_t l,
                                     const Rows& rw, double* routing) {
  const ParameterView p = parameters(places_.layer_first(l));
  const std::size_t norm = places_.norm, attention = places_.attention;
  // The row-parallel outputs are not kept: the residual adds that read them need neither in
  // backward, so both are the one whole-rows scratch.
  float* const projected = scratch(Activation::kWholeRows);
  norm_.forward(a[Activation::kNorm1], a[Activation::kNorm1Statistics], residual, p, rw);
  attention_.forward(projected, attention_arrays(a), a[Activation::kNorm1], p.from(norm), rw);
  norm_.residual_forward(a[Activation::kResidual2], a[Activation::kNorm2],
                         a[Activation::kNorm2Statistics], residual, projected,
                         p.from(norm + attention), rw);
  mlp_.forward(l, projected, a[Activation::kMlp], a[Activation::kRouter], a[Activation::kNorm2],
               p.from(2 * norm + attention), rw, routing, layer_bias(l));
  kernels::residual_forward(a[Activation::kLayerOutput], a[Activation::kResidual2], projected,
                            rw.local * spec_.shape.hidden);
  if (types_.stream_narrower()) {
    axis_.products().round_kept(a[Activation::kLayerOutput], rw.local * spec_.shape.hidden);
  }
}

void TransformerChunk::layer_backward(const Layer& a, const float* residual, std::size_t l,
                                      const Rows& rw, const float* dprobability) {
  const ParameterView p = parameters(places_.layer_first(l));
  const std::size_t norm = places_.norm, attention = places_.attention;
  float* const dresidual = scratch(Activation::kResidualGrad);
  // A narrow stream's sum after attention, as forward kept it (else as it is).
  axis_.products().widen_kept(a[Activation::kResidual2], rw.local * spec_.shape.hidden);
  // A norm's output gradient, whole: the scratch that held the row-parallel outputs in forward
  // (full recomputation's forward writes it before this layer's backward begins).
  float* const dnormed = scratch(Activation::kWholeRows);
  // output = residual2 + mlp: both get dresidual. The one buffer holds it, and then, the norm's
  // gradient added in place once the MLP's products have read it, d(residual2).
  mlp_.backward(l, dnormed, scratch(Activation::kMlpGrad), axis_.whole_output_grad(dresidual, rw),
                a[Activation::kMlp], a[Activation::kRouter], a[Activation::kNorm2],
                p.from(2 * norm + attention), rw, dprobability, layer_bias(l), layer_counts(l));
  norm_.backward(dresidual, axis_.column_input_grad(dnormed, rw), a[Activation::kResidual2],
                 a[Activation::kNorm2Statistics], p.from(norm + attention), rw);
  // residual2 = residual + attention, the same way. Attention's gradients go into the MLP's
  // arrays, dead now, where they fit.
  float* const grads =
      attention_grads_in_mlp_ ? a[Activation::kMlp] : scratch(Activation::kAttentionGrads);
  attention_.backward(dnormed, grads,
                      {scratch(Activation::kQkNormGrads), scratch(Activation::kKvHeadGrads)},
                      axis_.whole_output_grad(dresidual, rw), a[Activation::kNorm1],
                      attention_arrays(a), p.from(norm), rw);
  norm_.backward(dresidual, axis_.column_input_grad(dnormed, rw), residual,
                 a[Activation::kNorm1Statistics], p, rw);
}

float TransformerChunk::forward(std::size_t slot_index, std::span<const std::int32_t> tokens,
                                std::span<const std::int32_t> targets, std::size_t batch,
                                std::size_t seq, std::span<const BoundaryElement> input,
                                std::span<BoundaryElement> output, bool backward_follows) {
  check_chunk_batch(tokens, targets, batch, seq, limits());
  const std::size_t boundary = boundary_elements(batch, seq);
  check_chunk_forward_boundary(input.size(), output.size(), boundary, limits());
  while (slots_.size() <= slot_index) slots_.push_back(std::make_unique<Slot>());
  Slot& slot = *slots_[slot_index];
  size_slot(slot, batch, seq);
  size_scratch(batch, seq);
  if (range_.has_first()) slot.tokens.assign(tokens.begin(), tokens.end());
  if (has_head_) slot.targets.assign(targets.begin(), targets.end());
  slot.head_held = false;
  const Rows rw = rows(batch, seq);
  // A narrow stream's input is computed in float32 and kept rounded.
  const bool narrow = types_.stream_narrower();
  float* const first_input =
      narrow ? scratch(Activation::kStreamInput) : micro_batch(slot, Activation::kInput);
  if (!range_.has_first()) {
    std::copy(input.begin(), input.end(), first_input);
  } else {
    // Each unit is gathered just before its use and released after (no-ops unless a ZeRO-3
    // trainer has sharded the store).
    store_.gather(unit(0));
    embedding_.forward(first_input, slot.tokens.data(), parameters(0), rw);
    store_.release(unit(0));
  }
  if (narrow) {
    kernels::round_to_bf16(
        std::span<float>(first_input, boundary),
        std::span<BFloat16>(slot.arrays[static_cast<std::size_t>(Activation::kInput)].bf16(),
                            boundary));
  }
  // Under a narrow stream each layer reads its input from the working layer's output, which it
  // overwrites only after its last read of it (the residual add after attention).
  const float* residual = first_input;
  const bool auxiliary = spec_.aux_loss_weight > 0;
  slot.routing.assign(auxiliary ? 2 * spec_.shape.experts : 0, 0.0);
  for (std::size_t i = 0; i < layers(); ++i) {
    const std::size_t l = range_.first_layer + i;
    const Layer a = layer(slot, i);
    store_.gather(unit(places_.layer_first(l)));
    {
      const KeptInUse kept(axis_.products(), kept_arrays(a));
      layer_forward(a, residual, l, rw, auxiliary ? slot.routing.data() : nullptr);
      axis_.products().check_kept();
    }
    store_.release(unit(places_.layer_first(l)));
    residual = a[Activation::kLayerOutput];
  }
  if (!has_head_) {
    std::copy(residual, residual + boundary, output.begin());
    return 0;
  }
  if (auxiliary) finish_auxiliary_loss(slot, rw);
  gather_head();
  float* const losses = micro_batch(slot, Activation::kLosses);
  head_.forward(losses, micro_batch(slot, Activation::kHeadNorm),
                micro_batch(slot, Activation::kHeadStatistics), residual, slot.targets.data(),
                scratch(Activation::kLogits), scratch(Activation::kProbabilities),
                slot.table->head_block(), parameters(places_.final_norm()),
                parameters(places_.head), rw);
  // Backward starts with the head and the final norm: where it follows, they stay gathered.
  if (backward_follows) {
    slot.head_held = true;
  } else {
    release_head();
  }
  double sum = 0;
  for (std::size_t r = 0; r < rw.whole; ++r) sum += losses[r];
  return static_cast<float>(sum / static_cast<double>(rw.whole));
}

void TransformerChunk::backward(std::size_t slot_index,
                                std::span<const BoundaryElement> output_grad,
                                std::span<BoundaryElement> input_grad, float loss_scale,
                                const GradientsReady& ready) {
  if (slot_index >= slots_.size() || slots_[slot_index]->batch == 0) {
    throw InvalidArgument("backward of micro-batch slot " + std::to_string(slot_index) +
                          " before its forward");
  }
  Slot& slot = *slots_[slot_index];
  const std::size_t boundary = boundary_elements(slot.batch, slot.seq);
  check_chunk_backward_boundary(output_grad.size(), input_grad.size(), boundary, limits());
  size_scratch(slot.batch, slot.seq);
  const Rows rw = rows(slot.batch, slot.seq);
  const std::size_t L = layers();
  float* const dresidual = scratch(Activation::kResidualGrad);
  if (!has_head_) {
    std::copy(output_grad.begin(), output_grad.end(), dresidual);
  } else {
    if (!std::exchange(slot.head_held, false)) gather_head();
    const float* top = stream_input(slot, L);
    head_.backward(
        dresidual, scratch(Activation::kWholeRows), loss_scale, top,
        micro_batch(slot, Activation::kHeadNorm), micro_batch(slot, Activation::kHeadStatistics),
        slot.targets.data(), scratch(Activation::kLogits), scratch(Activation::kProbabilities),
        slot.table->head_block(), parameters(places_.final_norm()), parameters(places_.head), rw);
    // The tied embedding's gradient is final only after the embeddings' backward.
    tell(ready, places_.final_norm(),
         spec_.shape.tied_head ? places_.final_norm() + places_.norm - 1 : places_.head);
    release_head();
  }
  // dresidual holds d(the stream after layer l) on entry to each iteration, and d(before it)
  // after it (this rank's rows).
  for (std::size_t i = L; i-- > 0;) {
    const std::size_t l = range_.first_layer + i;
    const float* residual = stream_input(slot, i);
    const Layer a = layer(slot, i);
    store_.gather(unit(places_.layer_first(l)));
    // The unit is gathered once for the layer's backward (and full recomputation's forward).
    // Full recomputation: the layer's forward again, in float32, nothing kept; else the parts
    // widen what they read of the kept arrays, and the products read their kept inputs.
    if (recompute_ == Recompute::kFull) layer_forward(a, residual, l, rw);
    {
      const KeptInUse kept(axis_.products(), kept_arrays(a));
      layer_backward(a, residual, l, rw,
                     slot.aux_gradient.empty() ? nullptr : slot.aux_gradient.data());
    }
    tell(ready, places_.layer_first(l), places_.layer_first(l) + places_.per_layer - 1);
    store_.release(unit(places_.layer_first(l)));
  }
  if (!range_.has_first()) {
    std::copy(dresidual, dresidual + boundary, input_grad.begin());
    return;
  }
  embedding_.backward(dresidual, slot.tokens.data(), parameters(0), rw);
  tell(ready, 0, places_.embeddings - 1);
}

}  // namespace shardwise::train::transformer

namespace shardwise::train {

std::unique_ptr<ModelChunk> make_transformer_chunk(const TransformerSpec& spec,
                                                   const ModelDefinition& model,
                                                   ParameterStore& store,
                                                   const ChunkOptions& options) {
  return std::make_unique<transformer::TransformerChunk>(spec, model, store, options);
}

}  // namespace shardwise::train

#include "shardwise/strategy/activation_table.hpp"

#include <algorithm>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

constexpr std::size_t index(Activation a) { return static_cast<std::size_t>(a); }

// What an array's elements are, which sets their type (ElementTypes).
enum class Kind {
  kKept,               // what a layer keeps for backward: products' inputs and outputs
  kStream,             // the residual stream: a layer's input and output, the sum after attention
  kStatistic,          // statistics, log-sum-exps, the head's logits and probabilities, losses
  kWorking,            // what the chunk computes in: activations' gradients, outputs not kept
  kParameterGradient,  // a pass's share of a parameter's gradient
  kRounding,           // a product's operand rounded to the type the products read
};

struct Row {
  const char* name;
  Lifetime lifetime;
  Kind kind;
};

// In Activation's order. The head's norm output is computed in and read from the working type:
// the head's blocks read it in backward while the norm's gradient is written beside it.
constexpr std::array<Row, kActivationCount> kRows = {{
    {"norm1", Lifetime::kLayer, Kind::kKept},
    {"norm1_statistics", Lifetime::kLayer, Kind::kStatistic},
    {"projections", Lifetime::kLayer, Kind::kKept},
    {"qk_norm_input", Lifetime::kLayer, Kind::kKept},
    {"qk_norm_statistics", Lifetime::kLayer, Kind::kStatistic},
    {"attention", Lifetime::kLayer, Kind::kKept},
    {"log_sum_exp", Lifetime::kLayer, Kind::kStatistic},
    {"residual2", Lifetime::kLayer, Kind::kStream},
    {"norm2", Lifetime::kLayer, Kind::kKept},
    {"norm2_statistics", Lifetime::kLayer, Kind::kStatistic},
    {"mlp", Lifetime::kLayer, Kind::kKept},
    {"router", Lifetime::kLayer, Kind::kStatistic},
    {"layer_output", Lifetime::kLayerOutput, Kind::kStream},
    {"input", Lifetime::kMicroBatch, Kind::kStream},
    {"head_norm", Lifetime::kMicroBatch, Kind::kWorking},
    {"head_statistics", Lifetime::kMicroBatch, Kind::kStatistic},
    {"losses", Lifetime::kMicroBatch, Kind::kStatistic},
    {"residual_grad", Lifetime::kScratch, Kind::kWorking},
    {"whole_rows", Lifetime::kScratch, Kind::kWorking},
    {"mlp_grad", Lifetime::kScratch, Kind::kWorking},
    {"attention_grads", Lifetime::kScratch, Kind::kWorking},
    {"logits", Lifetime::kScratch, Kind::kStatistic},
    {"probabilities", Lifetime::kScratch, Kind::kStatistic},
    {"norm_local", Lifetime::kScratch, Kind::kWorking},
    {"norm_grad_local", Lifetime::kScratch, Kind::kWorking},
    {"partial_sum", Lifetime::kScratch, Kind::kWorking},
    {"gathered", Lifetime::kScratch, Kind::kWorking},
    {"norm_parameter_grads", Lifetime::kScratch, Kind::kParameterGradient},
    {"qk_norm_grads", Lifetime::kScratch, Kind::kParameterGradient},
    {"kv_head_grads", Lifetime::kScratch, Kind::kParameterGradient},
    {"stream_input", Lifetime::kScratch, Kind::kWorking},
    {"rounded_input", Lifetime::kScratch, Kind::kRounding},
    {"rounded_output_grad", Lifetime::kScratch, Kind::kRounding},
}};

void require_divides(std::size_t degree, std::size_t count, const char* what) {
  if (count % degree != 0) {
    throw InvalidArgument(std::string("a chunk over ") + std::to_string(degree) + " model ranks: " +
                          what + " (" + std::to_string(count) + ") must be a multiple of them");
  }
}

}  // namespace

std::size_t head_block_rows(std::size_t rows, std::size_t vocab_local) {
  const std::size_t by_size = kHeadBlockFloats / std::max<std::size_t>(vocab_local, 1);
  return std::max<std::size_t>(1, std::min(rows, std::max(by_size, kHeadBlockMinRows)));
}

Lifetime lifetime_of(Activation activation) { return kRows.at(index(activation)).lifetime; }
const char* name_of(Activation activation) { return kRows.at(index(activation)).name; }
bool is_statistic(Activation activation) {
  return kRows.at(index(activation)).kind == Kind::kStatistic;
}
bool is_kept(Activation activation) { return kRows.at(index(activation)).kind == Kind::kKept; }
bool is_stream(Activation activation) { return kRows.at(index(activation)).kind == Kind::kStream; }
DType element_type_of(Activation activation, const ElementTypes& types) {
  switch (kRows.at(index(activation)).kind) {
    case Kind::kKept: return types.activations;
    case Kind::kStream: return types.stream;
    case Kind::kStatistic: return types.statistics;
    case Kind::kWorking: return types.working;
    case Kind::kParameterGradient: return types.gradients;
    case Kind::kRounding: return types.compute;
  }
  return types.working;
}
DType working_type_of(Activation activation, const ElementTypes& types) {
  return is_kept(activation) || is_stream(activation) ? types.working
                                                      : element_type_of(activation, types);
}
bool kept_rounded(Activation activation, const ElementTypes& types) {
  return element_type_of(activation, types) != working_type_of(activation, types);
}

ActivationTable::ActivationTable(const TransformerShape& shape, const ChunkGeometry& geometry)
    : layers_(geometry.layers), recompute_(geometry.recompute) {
  const std::size_t t = std::max<std::size_t>(geometry.model_degree, 1);
  require_divides(t, shape.heads, "the heads");
  if (!shape.replicates_kv_heads(t)) require_divides(t, shape.kv_heads, "the key/value heads");
  // (A Mixture of Experts' MLP width is its dense layers', where it has any.)
  const bool dense = !shape.moe() || shape.mixed_layers();
  if (dense) require_divides(t, shape.mlp_width, "the MLP's width");
  require_divides(t, shape.vocab, "the vocabulary");
  const std::size_t C = shape.hidden, BT = geometry.batch * geometry.seq;
  const bool sp = geometry.sequence_parallel && t > 1;
  if (sp) require_divides(t, BT, "the micro-batch's positions");
  const std::size_t R = sp ? BT / t : BT;
  local_rows_ = R;
  whole_rows_ = BT;
  const std::size_t heads = shape.heads / t, kv_heads = shape.kv_heads_of(t);
  const std::size_t q = heads * shape.head_dim, kv = kv_heads * shape.head_dim;
  const std::size_t width = shape.mlp_width / t, vocab = shape.vocab / t;
  const std::size_t stats = shape.norm_statistics();
  auto& e = elements_;
  e[index(Activation::kNorm1)] = BT * C;
  e[index(Activation::kNorm1Statistics)] = R * stats;
  e[index(Activation::kProjections)] = BT * (q + 2 * kv);
  e[index(Activation::kQkNormInput)] = shape.qk_norm ? BT * (q + kv) : 0;
  e[index(Activation::kQkNormStatistics)] = shape.qk_norm ? BT * (heads + kv_heads) : 0;
  e[index(Activation::kAttention)] = BT * q;
  e[index(Activation::kLogSumExp)] = BT * heads;
  e[index(Activation::kResidual2)] = R * C;
  e[index(Activation::kNorm2)] = BT * C;
  e[index(Activation::kNorm2Statistics)] = R * stats;
  const std::size_t g = std::max<std::size_t>(geometry.expert_degree, 1);
  // A Mixture of Experts routes 1 / t of the rows on each model rank (moe_rows).
  // One size for every layer: a routed layer's or a dense one's, the larger where both are.
  const std::size_t mlp_rows = shape.moe() ? moe_rows(BT, t) : BT;
  const std::size_t routed_mlp = shape.moe() ? mlp_rows * shape.mlp_row_elements(t, g) : 0;
  const std::size_t dense_mlp = dense ? BT * shape.dense_row_elements(t) : 0;
  e[index(Activation::kMlp)] = std::max(routed_mlp, dense_mlp);
  e[index(Activation::kRouter)] = mlp_rows * shape.experts;
  e[index(Activation::kLayerOutput)] = R * C;
  e[index(Activation::kInput)] = R * C;
  const std::size_t head = geometry.has_head ? 1 : 0;
  e[index(Activation::kHeadNorm)] = head * BT * C;
  e[index(Activation::kHeadStatistics)] = head * R * stats;
  e[index(Activation::kLosses)] = head * BT;
  e[index(Activation::kResidualGrad)] = R * C;
  e[index(Activation::kWholeRows)] = BT * C;
  e[index(Activation::kMlpGrad)] = shape.mlp == MlpKind::kGelu ? BT * width : 0;
  // Attention's output's, the queries', keys' and values' gradients, side by side.
  const std::size_t attention_grads = 2 * q + 2 * kv;
  // Whether they fit depends on the widths alone (a chunk decides once for every micro-batch):
  // a Mixture of Experts' kMlp holds at least BT / t rows.
  attention_grads_in_mlp_ = (shape.moe() && attention_grads * t <= shape.mlp_row_elements(t, g)) ||
                            (dense && attention_grads <= shape.dense_row_elements(t));
  e[index(Activation::kAttentionGrads)] = attention_grads_in_mlp_ ? 0 : BT * attention_grads;
  head_block_ = geometry.has_head ? head_block_rows(BT, vocab) : 0;
  e[index(Activation::kLogits)] = head_block_ * vocab;
  e[index(Activation::kProbabilities)] = head_block_ * vocab;
  e[index(Activation::kNormLocal)] = sp ? R * C : 0;
  e[index(Activation::kNormGradLocal)] = sp ? R * C : 0;
  e[index(Activation::kPartialSum)] = sp ? BT * C : 0;
  e[index(Activation::kGathered)] = sp ? BT * C : 0;
  e[index(Activation::kNormParameterGrads)] = sp ? shape.norm_parameters() * C : 0;
  e[index(Activation::kQkNormGrads)] = shape.qk_norm && t > 1 ? 2 * shape.head_dim : 0;
  e[index(Activation::kKvHeadGrads)] =
      shape.replicates_kv_heads(t) ? 2 * kv * (C + (shape.qkv_bias ? 1 : 0)) : 0;
  e[index(Activation::kStreamInput)] = geometry.narrow_stream ? R * C : 0;
  if (geometry.rounded_products) {
    // Kept arrays are the layers' inputs, except under full recomputation, which keeps none. A
    // Mixture of Experts' products read the k routed rows (hidden wide, then expert_width), and
    // write their gate and up products, their outputs and the router's logits. Over g expert
    // ranks one expert may get up to g x BT rows (a token chooses it once on each rank), and its
    // received rows are no kept array: their products round their inputs here.
    const std::size_t routed =
        std::max(mlp_rows * shape.experts_per_token, g > 1 ? g * mlp_rows : 0);
    const std::size_t dense_width = dense ? width : 0;
    const std::size_t mlp_input = shape.moe() ? routed * std::max(C, shape.expert_width) : 0;
    const std::size_t mlp_output = std::max(
        shape.moe()
            ? std::max(routed * std::max(2 * shape.expert_width, C), mlp_rows * shape.experts)
            : 0,
        BT * dense_width);
    const std::size_t head_input = head_block_ * C;
    const std::size_t layer_input = geometry.recompute == Recompute::kFull && geometry.layers > 0
                                        ? std::max(BT * std::max({C, q, dense_width}), mlp_input)
                                        : 0;
    // The rows an expert axis brings are no kept array: their products round them here.
    const std::size_t received_input = g > 1 && geometry.layers > 0 ? mlp_input : 0;
    e[index(Activation::kRoundedInput)] = std::max({head_input, layer_input, received_input});
    const std::size_t qkv_out = shape.fused_qkv ? 3 * q : std::max(q, kv);
    const std::size_t layer_output =
        geometry.layers > 0 ? std::max(BT * std::max(qkv_out, C), mlp_output) : 0;
    e[index(Activation::kRoundedOutputGrad)] = std::max(layer_output, head_block_ * vocab);
  }
}

std::size_t ActivationTable::sum(Lifetime lifetime, const ElementTypes* types, bool working) const {
  std::size_t sum = 0;
  for (std::size_t i = 0; i < kActivationCount; ++i) {
    if (kRows[i].lifetime != lifetime) continue;
    const auto activation = static_cast<Activation>(i);
    if (types == nullptr) {
      sum += elements_[i];
    } else {
      sum += elements_[i] * size_in_bytes(working ? working_type_of(activation, *types)
                                                  : element_type_of(activation, *types));
    }
  }
  return sum;
}

std::size_t ActivationTable::working_layer(const ElementTypes* types) const {
  if (layers_ == 0) return 0;
  const bool full = recompute_ == Recompute::kFull;
  std::size_t sum = 0;
  for (std::size_t i = 0; i < kActivationCount; ++i) {
    const auto activation = static_cast<Activation>(i);
    const Lifetime lifetime = kRows[i].lifetime;
    if (lifetime != Lifetime::kLayer && lifetime != Lifetime::kLayerOutput) continue;
    const bool rounded = types != nullptr && kept_rounded(activation, *types);
    if (!rounded && !(full && lifetime == Lifetime::kLayer)) continue;
    sum +=
        elements_[i] * (types == nullptr ? 1 : size_in_bytes(working_type_of(activation, *types)));
  }
  return sum;
}

std::size_t ActivationTable::chunk_sum(std::size_t slots, const ElementTypes* types) const {
  const std::size_t output = sum(Lifetime::kLayerOutput, types);
  const std::size_t layer = sum(Lifetime::kLayer, types);
  const bool full = recompute_ == Recompute::kFull;
  const std::size_t per_slot =
      layers_ * (full ? output : layer + output) + sum(Lifetime::kMicroBatch, types);
  return slots * per_slot + working_layer(types) + sum(Lifetime::kScratch, types);
}

std::size_t ActivationTable::elements(Lifetime lifetime) const { return sum(lifetime, nullptr); }

std::size_t ActivationTable::layer_elements() const {
  return elements(Lifetime::kLayer) + elements(Lifetime::kLayerOutput);
}

std::size_t ActivationTable::chunk_elements(std::size_t slots) const {
  return chunk_sum(slots, nullptr);
}

std::size_t ActivationTable::working_layer_bytes(const ElementTypes& types) const {
  return working_layer(&types);
}

std::size_t ActivationTable::bytes(Activation activation, const ElementTypes& types) const {
  return elements(activation) * size_in_bytes(element_type_of(activation, types));
}

std::size_t ActivationTable::bytes(Lifetime lifetime, const ElementTypes& types) const {
  return sum(lifetime, &types);
}

std::size_t ActivationTable::layer_bytes(const ElementTypes& types) const {
  return bytes(Lifetime::kLayer, types) + bytes(Lifetime::kLayerOutput, types);
}

std::size_t ActivationTable::chunk_bytes(std::size_t slots, const ElementTypes& types) const {
  return chunk_sum(slots, &types);
}

}  // namespace shardwise

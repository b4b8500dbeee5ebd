#pragma once
// What a decoder-only transformer is, as its parts see it: the sizes and the kind of each part
// (positions, norm, attention's projections and biases, MLP, head). One value per family
// configuration, stated by the family, never guessed from parameter names: the training layer
// assembles its chunk from it, and the planner sizes the same chunk's activations from it.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace shardwise {

enum class PositionKind { kLearned, kRotary };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class MlpKind { kGelu, kGatedSilu };

struct TransformerShape {
  std::size_t layers = 0;
  std::size_t hidden = 0;
  std::size_t heads = 0;
  std::size_t kv_heads = 0;  // heads without grouped-query attention
  std::size_t head_dim = 0;
  std::size_t mlp_width = 0;  // the MLP's inner width
  std::size_t vocab = 0;
  std::size_t context = 0;  // the longest sequence
  PositionKind positions = PositionKind::kLearned;
  NormKind norm = NormKind::kLayerNorm;
  MlpKind mlp = MlpKind::kGelu;
  // Q, K and V as one stacked (3, heads x head_dim, hidden) parameter (GPT-2's c_attn) or three.
  bool fused_qkv = false;
  bool qkv_bias = false;               // biases on the query, key and value projections
  bool attention_output_bias = false;  // a bias on attention's output projection
  bool mlp_bias = false;               // biases on the MLP's matrices (GELU's)
  bool qk_norm = false;                // an RMSNorm over each head's queries and keys (Qwen3)
  bool tied_head = false;              // the output head is the token embedding
  // A Mixture of Experts (experts > 0): every layer's MLP routes each token to
  // `experts_per_token` of `experts` gated-SiLU experts of inner width `expert_width`, each
  // weighted by its router probability (renormalised over the chosen where
  // `renormalize_routing`); `mlp` is then kGatedSilu and `mlp_width` unused.
  std::size_t experts = 0;
  std::size_t experts_per_token = 0;
  std::size_t expert_width = 0;
  bool renormalize_routing = false;
  // The loss adds the routers' auxiliary load-balancing loss, whose statistics (2 x experts
  // sums) are summed over the batch's ranks once a forward.
  bool aux_loss = false;
  // Of a Mixture of Experts, the layers whose MLP is a dense gated-SiLU MLP of `mlp_width`
  // instead (Qwen3-MoE's decoder_sparse_step and mlp_only_layers), ascending; empty: every
  // layer routes.
  std::vector<std::size_t> dense_layers;

  friend bool operator==(const TransformerShape&, const TransformerShape&) = default;

  [[nodiscard]] std::size_t q_width() const { return heads * head_dim; }
  // Whether `degree` model ranks hold each key/value head on degree / kv_heads ranks: the
  // heads' count divides the degree without the degree dividing it (vLLM's rule).
  [[nodiscard]] bool replicates_kv_heads(std::size_t degree) const {
    return degree > 1 && kv_heads % degree != 0 && degree % kv_heads == 0;
  }
  // The key/value heads one of `degree` model ranks computes with: its share, or one.
  [[nodiscard]] std::size_t kv_heads_of(std::size_t degree) const {
    return replicates_kv_heads(degree) ? 1 : kv_heads / degree;
  }
  // Floats a norm keeps per row for backward: LayerNorm's mean and reciprocal deviation,
  // RMSNorm's reciprocal root mean square.
  [[nodiscard]] std::size_t norm_statistics() const { return norm == NormKind::kLayerNorm ? 2 : 1; }
  // A norm's parameters (weight, and LayerNorm's bias), each `hidden` long.
  [[nodiscard]] std::size_t norm_parameters() const { return norm == NormKind::kLayerNorm ? 2 : 1; }
  // The MLP's arrays a layer keeps, each mlp_width wide per row: GELU's input and output;
  // the gate, up and their product.
  [[nodiscard]] std::size_t mlp_arrays() const { return mlp == MlpKind::kGelu ? 2 : 3; }
  [[nodiscard]] bool moe() const { return experts > 0; }
  // Whether layer l's MLP is the Mixture of Experts, and how many of layers [first, end) are.
  [[nodiscard]] bool moe_layer(std::size_t l) const {
    return moe() && !std::binary_search(dense_layers.begin(), dense_layers.end(), l);
  }
  [[nodiscard]] std::size_t moe_layers(std::size_t first, std::size_t end) const {
    std::size_t count = 0;
    for (std::size_t l = first; l < end; ++l) count += moe_layer(l) ? 1 : 0;
    return count;
  }
  // Whether some layers route and others do not.
  [[nodiscard]] bool mixed_layers() const { return moe() && !dense_layers.empty(); }
  // What a layer's MLP keeps per row over `degree` model ranks (the table's kMlp): a dense
  // MLP's arrays (mlp_arrays() of its width's share); a Mixture of Experts' k routed copies of
  // the row (hidden), their gate and up products (2 expert_width), activation (expert_width) and
  // output (hidden). Over `expert_degree` > 1 expert ranks only the routed copies and their
  // outputs: the rows the experts receive vary with the routing and are kept outside the table.
  // (Of a Mixture of Experts with dense layers, the routed layers'; dense_row_elements is the
  // dense ones'.)
  [[nodiscard]] std::size_t mlp_row_elements(std::size_t degree,
                                             std::size_t expert_degree = 1) const {
    if (moe() && expert_degree > 1) return experts_per_token * 2 * hidden;
    if (moe()) return experts_per_token * (2 * hidden + 3 * expert_width);
    return dense_row_elements(degree);
  }
  [[nodiscard]] std::size_t dense_row_elements(std::size_t degree) const {
    return mlp_arrays() * (mlp_width / degree);
  }
};

}  // namespace shardwise

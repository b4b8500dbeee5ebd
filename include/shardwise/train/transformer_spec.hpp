#pragma once
// A decoder-only transformer as the training layer assembles it: a TransformerShape (which part
// of each kind: positions, norm, attention's projections and biases, MLP, head) and the numbers
// its parts compute with. A family states one (models/); make_transformer_chunk runs it on any
// layout, so the machinery of a chunk — micro-batch slots, ZeRO-3's gathers, recomputation,
// tensor and sequence parallelism, the head's blocks, gradients announced as they become final —
// is written once for every family.
//
// The parameters, in the store's order (the family names them; the parts read them by place):
//   embeddings  the token embedding (vocab, hidden); learned positions (context, hidden)
//   each layer  norm1 (weight; LayerNorm's bias)
//               attention: fused, qkv (3, q width, hidden) [bias (3, q width)]
//                          else q (q width, hidden) [bias], k (kv width, hidden) [bias],
//                          v [bias]; then the output (hidden, q width) [bias (hidden)];
//                          with a norm of queries and keys, q_norm and k_norm (head_dim)
//               norm2
//               MLP: GELU, fc (width, hidden) [bias], proj (hidden, width) [bias];
//                    gated, gate (width, hidden), up (width, hidden), down (hidden, width)
//               (the biases in brackets where the shape asks for them)
//   after       the final norm; the head (vocab, hidden) unless tied to the token embedding

#include <cstddef>
#include <memory>

#include "shardwise/kernels/rotary.hpp"
#include "shardwise/strategy/transformer_shape.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::train {

struct TransformerSpec {
  TransformerShape shape;
  double norm_eps = 1e-5;  // RMSNorm's epsilon (the LayerNorm kernel's is 1e-5)
  double rope_theta = 10000;
  kernels::RotaryScaling rope_scaling;  // factor 0: none
  // A Mixture of Experts' auxiliary load-balancing loss, this much of it added to the loss
  // (0: none): transformers' load_balancing_loss_func over every layer's routing of the batch.
  double aux_loss_weight = 0;
};

// Where each part's parameters sit in the store's order (above).
struct TransformerParameterLayout {
  std::size_t embeddings = 0;  // the token embedding and any learned positions
  std::size_t per_layer = 0;
  std::size_t norm = 0;       // a norm's parameters
  std::size_t attention = 0;  // a layer's attention's
  std::size_t mlp = 0;        // a layer's MLP's
  std::size_t layers = 0;

  [[nodiscard]] std::size_t layer_first(std::size_t layer) const {
    return embeddings + layer * per_layer;
  }
  [[nodiscard]] std::size_t final_norm() const { return layer_first(layers); }
  // The head's weight: the token embedding (tied) or the last parameter.
  std::size_t head = 0;
  [[nodiscard]] std::size_t count() const { return final_norm() + norm + (head == 0 ? 0 : 1); }
};
[[nodiscard]] TransformerParameterLayout parameter_layout(const TransformerShape& shape);

// A chunk of `model` (which states `spec`) over `options`' range and layout, reading its
// parameters from `store` (chunk_parameter_indices). InvalidArgument where the store's blocks do
// not match, or sequence parallelism is asked without a model axis.
[[nodiscard]] std::unique_ptr<ModelChunk> make_transformer_chunk(const TransformerSpec& spec,
                                                                 const ModelDefinition& model,
                                                                 ParameterStore& store,
                                                                 const ChunkOptions& options);

// A decoder of the whole of `model` (train/decoder.hpp) on `tensor_parallel`'s model axis, the
// store holding every parameter as build_decoder's contract says, caching at most `capacity`
// positions (0: the context): the same parts, attention through a key/value cache, the products
// in `precision`.
[[nodiscard]] std::unique_ptr<Decoder> make_transformer_decoder(
    const TransformerSpec& spec, const ModelDefinition& model, ParameterStore& store,
    const TensorParallel& tensor_parallel, std::size_t capacity, Precision precision);

}  // namespace shardwise::train

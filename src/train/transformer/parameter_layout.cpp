#include "shardwise/train/transformer_spec.hpp"

namespace shardwise::train {

TransformerParameterLayout parameter_layout(const TransformerShape& shape) {
  TransformerParameterLayout layout;
  layout.embeddings = shape.positions == PositionKind::kLearned ? 2 : 1;
  layout.norm = shape.norm_parameters();
  const std::size_t projections = shape.fused_qkv ? 1 : 3;
  layout.attention = projections * (shape.qkv_bias ? 2 : 1) +
                     (shape.attention_output_bias ? 2 : 1) + (shape.qk_norm ? 2 : 0);
  layout.mlp = shape.mlp == MlpKind::kGelu ? (shape.mlp_bias ? 4 : 2) : 3;
  layout.per_layer = 2 * layout.norm + layout.attention + layout.mlp;
  layout.layers = shape.layers;
  layout.head = shape.tied_head ? 0 : layout.final_norm() + layout.norm;
  return layout;
}

}  // namespace shardwise::train

// The GPT as a list of the training layer's parts (train/transformer_spec.hpp).
#include "shardwise/models/gpt.hpp"

namespace shardwise::models {

train::TransformerSpec gpt_transformer(const GptConfig& config) {
  train::TransformerSpec spec;
  TransformerShape& shape = spec.shape;
  shape.layers = config.n_layer;
  shape.hidden = config.n_embd;
  shape.heads = config.n_head;
  shape.kv_heads = config.n_head;
  shape.head_dim = config.n_embd / config.n_head;
  shape.mlp_width = 4 * config.n_embd;
  shape.vocab = config.vocab_size;
  shape.context = config.block_size;
  shape.positions = PositionKind::kLearned;
  shape.norm = NormKind::kLayerNorm;
  shape.mlp = MlpKind::kGelu;
  shape.fused_qkv = true;
  shape.qkv_bias = true;
  shape.attention_output_bias = true;
  shape.mlp_bias = true;
  shape.tied_head = true;
  return spec;
}

}  // namespace shardwise::models

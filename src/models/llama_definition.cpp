// The Llama as a training-layer model definition: its configuration as JSON, its parameters'
// layers, costs and chunks.
#include <nlohmann/json.hpp>

#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/train/parameter_shardings.hpp"

namespace shardwise::models {
namespace {

// "a Llama", "a Qwen2", "a Qwen3".
std::string llama_kind(LlamaVariant variant) { return "a " + display_name(variant); }

std::string llama_text(const LlamaConfig& c) {
  std::string text =
      std::to_string(c.n_layer) + " layers of " + std::to_string(c.hidden_size) + ", " +
      std::to_string(c.n_head) + " heads of " + std::to_string(c.head_dim) + " sharing " +
      std::to_string(c.n_kv_head) + " key/value heads, MLP " + std::to_string(c.intermediate_size) +
      ", vocabulary " + std::to_string(c.vocab_size) + ", context " +
      std::to_string(c.context_length) + ", " + (c.tie_word_embeddings ? "tied" : "untied") +
      " head" + (c.attention_bias ? ", attention biases" : "");
  if (c.experts > 0) {
    text += ", " + std::to_string(c.experts) + " experts of " + std::to_string(c.expert_width) +
            ", " + std::to_string(c.experts_per_token) + " per token" +
            (c.renormalize_routing ? " (renormalised)" : "");
  }
  return text;
}

}  // namespace

train::TransformerSpec llama_transformer(const LlamaConfig& config) {
  train::TransformerSpec spec;
  TransformerShape& shape = spec.shape;
  shape.layers = config.n_layer;
  shape.hidden = config.hidden_size;
  shape.heads = config.n_head;
  shape.kv_heads = config.n_kv_head;
  shape.head_dim = config.head_dim;
  shape.mlp_width = config.intermediate_size;
  shape.vocab = config.vocab_size;
  shape.context = config.context_length;
  shape.positions = PositionKind::kRotary;
  shape.norm = NormKind::kRmsNorm;
  shape.mlp = MlpKind::kGatedSilu;
  shape.tied_head = config.tie_word_embeddings;
  shape.qkv_bias = config.variant == LlamaVariant::kQwen2 || config.attention_bias;
  shape.attention_output_bias = config.attention_bias;
  shape.qk_norm =
      config.variant == LlamaVariant::kQwen3 || config.variant == LlamaVariant::kQwen3Moe;
  shape.experts = config.experts;
  shape.experts_per_token = config.experts_per_token;
  shape.expert_width = config.expert_width;
  shape.renormalize_routing = config.renormalize_routing;
  shape.aux_loss = config.aux_loss_weight() > 0;
  shape.dense_layers = config.dense_layers();
  spec.norm_eps = config.rms_norm_eps;
  spec.aux_loss_weight = config.aux_loss_weight();
  spec.rope_theta = config.rope_theta;
  spec.rope_scaling = config.rope_scaling;
  return spec;
}

LlamaDefinition::LlamaDefinition(const LlamaConfig& config) : config_(config) { validate(config_); }

std::string LlamaDefinition::config_json() const {
  return nlohmann::json::parse(llama_config_json(config_)).dump();
}

std::string LlamaDefinition::describe() const {
  return llama_kind(config_.variant) + " of " + llama_text(config_);
}

std::string LlamaDefinition::describe_config(const std::string& config_json) const {
  try {
    const LlamaConfig other = llama_config_from_json(config_json, "the model");
    return llama_kind(other.variant) + " of " + llama_text(other);
  } catch (const std::exception&) {
    return ModelDefinition::describe_config(config_json);
  }
}

std::vector<train::ParameterSpec> LlamaDefinition::parameters() const {
  return llama_parameters(config_);
}

std::vector<std::int64_t> LlamaDefinition::parameter_layers() const {
  const train::TransformerParameterLayout places =
      train::parameter_layout(llama_transformer(config_).shape);
  std::vector<std::int64_t> layers{-1};  // the embedding
  for (std::size_t l = 0; l < config_.n_layer; ++l) {
    layers.insert(layers.end(), places.per_layer, static_cast<std::int64_t>(l));
  }
  layers.insert(layers.end(), config_.tie_word_embeddings ? 1 : 2, -1);  // norm (and head)
  return layers;
}

std::vector<std::string> LlamaDefinition::chunk_parameters(const train::LayerRange& range) const {
  if (range.first_layer >= range.end_layer || range.end_layer > config_.n_layer) {
    throw InvalidArgument("a chunk of layers " + std::to_string(range.first_layer) + " to " +
                          std::to_string(range.end_layer) + " of the model's " +
                          std::to_string(config_.n_layer) +
                          "; expected at least one layer, within the model");
  }
  const std::vector<train::ParameterSpec> whole = parameters();
  const std::vector<std::int64_t> layer_of = parameter_layers();
  const bool head = range.has_last(config_.n_layer);
  const std::size_t final_norm =
      train::parameter_layout(llama_transformer(config_).shape).final_norm();
  std::vector<std::string> names;
  for (std::size_t p = 0; p < whole.size(); ++p) {
    const std::int64_t l = layer_of[p];
    const bool keep = (p == 0 && (range.has_first() || (head && config_.tie_word_embeddings))) ||
                      (l >= 0 && static_cast<std::size_t>(l) >= range.first_layer &&
                       static_cast<std::size_t>(l) < range.end_layer) ||
                      (p >= final_norm && head);
    if (keep) names.push_back(whole[p].name);
  }
  return names;
}

void LlamaDefinition::check_stages(std::int64_t stages, const std::string& field) const {
  if (stages > 1 && config_.aux_loss_weight() > 0) {
    throw InvalidArgument(field + ": " + std::to_string(stages) +
                          " pipeline stages split the layers, and the auxiliary load-balancing "
                          "loss (output_router_logits) couples every layer's routing of a "
                          "micro-batch; shardwise does not run the two together");
  }
}

std::vector<PartitionSpec> LlamaDefinition::model_placements(int degree) const {
  return llama_model_placements(config_, degree);
}

std::vector<train::SharedRows> LlamaDefinition::shared_rows(int degree) const {
  return llama_shared_rows(config_, degree);
}

ModelManifest LlamaDefinition::manifest() const {
  ModelManifest manifest = train::manifest_of(parameters());
  const auto head = static_cast<std::int64_t>(config_.head_dim);
  manifest.axis_units = {{"heads", head}, {"kv_heads", head}};
  manifest.transformer = llama_transformer(config_).shape;
  return manifest;
}

std::vector<double> LlamaDefinition::layer_flops(std::size_t seq) const {
  const auto C = static_cast<double>(config_.hidden_size);
  const auto Q = static_cast<double>(config_.n_head * config_.head_dim);
  const auto KV = static_cast<double>(config_.n_kv_head * config_.head_dim);
  const auto F = static_cast<double>(config_.intermediate_size);
  // A Mixture of Experts: the router's product and each token's k experts'.
  const double mlp = config_.experts > 0 ? 2 * C * static_cast<double>(config_.experts) +
                                               6 * C * static_cast<double>(config_.expert_width) *
                                                   static_cast<double>(config_.experts_per_token)
                                         : 6 * C * F;
  const double per_token = 2 * C * (2 * Q + 2 * KV) + mlp + 4 * static_cast<double>(seq) * Q;
  return std::vector<double>(config_.n_layer, per_token);
}

double LlamaDefinition::head_flops() const {
  return 2 * static_cast<double>(config_.vocab_size) * static_cast<double>(config_.hidden_size);
}

std::unique_ptr<train::ModelChunk> LlamaDefinition::build_chunk(
    train::ParameterStore& store, const train::ChunkOptions& options) const {
  return train::make_transformer_chunk(llama_transformer(config_), *this, store, options);
}

std::unique_ptr<train::Decoder> LlamaDefinition::build_decoder(
    train::ParameterStore& store, const train::TensorParallel& tensor_parallel,
    std::size_t capacity, Precision precision) const {
  return train::make_transformer_decoder(llama_transformer(config_), *this, store, tensor_parallel,
                                         capacity, precision);
}

}  // namespace shardwise::models

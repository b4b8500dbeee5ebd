// The GPT as a training-layer model definition: its sizes as JSON, its parameters' layers and
// the chunks the job builds.
#include <nlohmann/json.hpp>

#include "detail/gpt_layout.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/gpt.hpp"

namespace shardwise::models {
namespace {

std::string gpt_text(const GptConfig& gpt) {
  return "n_layer " + std::to_string(gpt.n_layer) + ", n_head " + std::to_string(gpt.n_head) +
         ", n_embd " + std::to_string(gpt.n_embd) + ", block_size " +
         std::to_string(gpt.block_size) + ", vocab_size " + std::to_string(gpt.vocab_size);
}

}  // namespace

GptDefinition::GptDefinition(const GptConfig& config) : config_(config) { validate(config_); }

std::string GptDefinition::config_json() const {
  return nlohmann::json{{"n_layer", config_.n_layer},
                        {"n_head", config_.n_head},
                        {"n_embd", config_.n_embd},
                        {"block_size", config_.block_size},
                        {"vocab_size", config_.vocab_size}}
      .dump();
}

std::string GptDefinition::describe() const { return "a GPT of " + gpt_text(config_); }

std::string GptDefinition::describe_config(const std::string& config_json) const {
  try {
    const nlohmann::json model = nlohmann::json::parse(config_json);
    GptConfig gpt;
    for (const auto& [key, field] : {std::pair{"n_layer", &gpt.n_layer},
                                     {"n_head", &gpt.n_head},
                                     {"n_embd", &gpt.n_embd},
                                     {"block_size", &gpt.block_size},
                                     {"vocab_size", &gpt.vocab_size}}) {
      *field = model.at(key).get<std::size_t>();
    }
    return "a GPT of " + gpt_text(gpt);
  } catch (const std::exception&) {
    return ModelDefinition::describe_config(config_json);
  }
}

std::vector<train::ParameterSpec> GptDefinition::parameters() const {
  return gpt_parameters(config_);
}

std::vector<std::int64_t> GptDefinition::parameter_layers() const {
  std::vector<std::int64_t> layers{-1, -1};  // the embeddings
  for (std::size_t l = 0; l < config_.n_layer; ++l) {
    layers.insert(layers.end(), detail::kPerLayer, static_cast<std::int64_t>(l));
  }
  layers.insert(layers.end(), 2, -1);  // the final LayerNorm
  return layers;
}

std::vector<std::string> GptDefinition::chunk_parameters(const train::LayerRange& range) const {
  std::vector<std::string> names;
  for (const train::ParameterSpec& spec : gpt_stage_parameters(config_, range)) {
    names.push_back(spec.name);
  }
  return names;
}

std::vector<PartitionSpec> GptDefinition::model_placements(int degree) const {
  return gpt_model_placements(config_, degree);
}

ModelManifest GptDefinition::manifest() const { return gpt_manifest(config_); }

std::vector<double> GptDefinition::layer_flops(std::size_t seq) const {
  const auto C = static_cast<double>(config_.n_embd);
  return std::vector<double>(config_.n_layer, 24 * C * C + 4 * static_cast<double>(seq) * C);
}

double GptDefinition::head_flops() const {
  return 2 * static_cast<double>(config_.vocab_size) * static_cast<double>(config_.n_embd);
}

std::unique_ptr<train::ModelChunk> GptDefinition::build_chunk(
    train::ParameterStore& store, const train::ChunkOptions& options) const {
  return train::make_transformer_chunk(gpt_transformer(config_), *this, store, options);
}

std::unique_ptr<train::Decoder> GptDefinition::build_decoder(
    train::ParameterStore& store, const train::TensorParallel& tensor_parallel,
    std::size_t capacity, Precision precision) const {
  return train::make_transformer_decoder(gpt_transformer(config_), *this, store, tensor_parallel,
                                         capacity, precision);
}

}  // namespace shardwise::models

#include "shardwise/models/hf_llama.hpp"

#include <cstring>

#include "detail/hf_tensors.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {

std::shared_ptr<const train::ModelDefinition> HfLlamaAdapter::model_from_hf_config(
    const std::string& text, const std::string& what, std::vector<std::string>& notes) const {
  return std::make_shared<LlamaDefinition>(llama_config_from_json(text, what, notes));
}

std::string HfLlamaAdapter::words() const { return "Hugging Face " + display_name(variant_); }

std::vector<std::string> HfLlamaAdapter::model_types() const {
  if (variant_ == LlamaVariant::kLlama) return {"llama", "mistral"};
  return {to_string(variant_)};
}

std::string HfLlamaAdapter::hf_config_json(const train::ModelDefinition& model) const {
  const auto* llama = dynamic_cast<const LlamaDefinition*>(&model);
  if (llama == nullptr || llama->config().variant != variant_) {
    throw InvalidArgument("the " + format() + " format holds " + to_string(variant_) +
                          " models; this is " + model.describe());
  }
  return llama_config_json(llama->config(), false);
}

void HfLlamaAdapter::read_block(const ckpt::CheckpointReader& file, const std::string& hf_name,
                                const std::string& name, const Shape& shape, const ShardIndex& box,
                                float* out) const {
  check_tensor(file, hf_name, name, shape);
  const std::vector<float> values = detail::read_hf_floats(file, hf_name, box);
  std::memcpy(out, values.data(), values.size() * sizeof(float));
}

void HfLlamaAdapter::check_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                                  const std::string& name, const Shape& shape) const {
  detail::check_hf_tensor(file, hf_name, shape, "Llama's " + name);
}

std::string HfLlamaAdapter::hf_name_of(const ckpt::CheckpointIndex& file,
                                       const std::string& name) const {
  if (file.find(name) != nullptr) return name;
  throw ckpt::CheckpointError("the file has no tensor '" + name + "'");
}

bool HfLlamaAdapter::ignored_tensor(const std::string& hf_name) const {
  return hf_name.ends_with(".rotary_emb.inv_freq");
}

}  // namespace shardwise::models

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

namespace {

// The published names of a Mixture of Experts' parameter `name` (the stacked experts split per
// expert; Mixtral's MLP is its block_sparse_moe); empty for any other parameter.
std::vector<HfPiece> expert_pieces(LlamaVariant variant, const std::string& name,
                                   const Shape& shape) {
  if (!has_experts(variant)) return {};
  const bool mixtral = variant == LlamaVariant::kMixtral;
  const std::size_t at = name.rfind("mlp.");
  if (at == std::string::npos) return {};
  const std::string layer = name.substr(0, at) + (mixtral ? "block_sparse_moe." : "mlp.");
  const std::string rest = name.substr(at + 4);
  if (rest == "gate.weight") return {{layer + "gate.weight", whole_box(shape), shape}};
  const bool gate_up = rest == "experts.gate_up_proj";
  if ((!gate_up && rest != "experts.down_proj") || shape.size() != 3) return {};
  const std::int64_t rows = gate_up ? shape[1] / 2 : shape[1], columns = shape[2];
  std::vector<HfPiece> pieces;
  for (std::int64_t e = 0; e < shape[0]; ++e) {
    const std::string expert = layer + "experts." + std::to_string(e) + ".";
    const auto piece = [&](const char* matrix, std::int64_t first_row) {
      pieces.push_back({expert + matrix + ".weight",
                        {{e, e + 1}, {first_row, first_row + rows}, {0, columns}},
                        {rows, columns}});
    };
    if (gate_up) {
      piece(mixtral ? "w1" : "gate_proj", 0);
      piece(mixtral ? "w3" : "up_proj", rows);
    } else {
      piece(mixtral ? "w2" : "down_proj", 0);
    }
  }
  return pieces;
}

}  // namespace

std::vector<HfPiece> HfLlamaAdapter::hf_pieces(const ckpt::CheckpointIndex& file,
                                               const std::string& name, const Shape& shape) const {
  if (file.find(name) == nullptr) {
    if (std::vector<HfPiece> pieces = expert_pieces(variant_, name, shape); !pieces.empty()) {
      return pieces;
    }
  }
  return HfAdapter::hf_pieces(file, name, shape);
}

std::vector<HfPiece> HfLlamaAdapter::hf_export_pieces(const std::string& name,
                                                      const Shape& shape) const {
  if (std::vector<HfPiece> pieces = expert_pieces(variant_, name, shape); !pieces.empty()) {
    return pieces;
  }
  return HfAdapter::hf_export_pieces(name, shape);
}

bool HfLlamaAdapter::ignored_tensor(const std::string& hf_name) const {
  return hf_name.ends_with(".rotary_emb.inv_freq");
}

}  // namespace shardwise::models

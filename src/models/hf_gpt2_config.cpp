// The GPT's reader of a Hugging Face GPT-2 config.json, as transformers 2 to 5 write it and as the
// published gpt2, gpt2-medium, -large and -xl configs hold it.
#include <cmath>
#include <cstdint>

#include "../detail/json_reader.hpp"
#include "detail/hf_config_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/hf_gpt2.hpp"

namespace shardwise::models {
namespace {

constexpr auto kMaxDimension = static_cast<std::size_t>(kMaxConfigDimension);
constexpr auto kMaxLayers = static_cast<std::size_t>(kMaxModelLayers);

bool is_true(const nlohmann::json& value) { return value.is_boolean() && value.get<bool>(); }
bool is_false(const nlohmann::json& value) { return value.is_boolean() && !value.get<bool>(); }

// The settings of GPT-2's attention and blocks: refused where they ask for another computation
// than shardwise's GPT's.
void read_architecture(detail::HfConfigReader& r, const GptConfig& gpt) {
  if (const nlohmann::json* v = r.find("n_ctx");
      v != nullptr && !(v->is_number_unsigned() && v->get<std::size_t>() == gpt.block_size)) {
    r.refuse("n_ctx", *v, "expected n_positions, " + std::to_string(gpt.block_size));
  }
  if (const nlohmann::json* v = r.find("n_inner");
      v != nullptr && !(v->is_number_unsigned() && v->get<std::size_t>() == 4 * gpt.n_embd)) {
    r.refuse("n_inner", *v, "shardwise's GPT has 4 x n_embd");
  }
  // gelu_pytorch_tanh is gelu_new's formula, computed by PyTorch's kernel.
  if (const nlohmann::json* v = r.find("activation_function");
      v != nullptr && *v != "gelu_new" && *v != "gelu_pytorch_tanh") {
    r.refuse("activation_function", *v, "shardwise's GPT computes GELU's tanh form (gelu_new)");
  }
  if (const nlohmann::json* v = r.find("layer_norm_epsilon");
      v != nullptr && (!v->is_number() || std::abs(v->get<double>() - 1e-5) > 1e-12)) {
    r.refuse("layer_norm_epsilon", *v, "shardwise's GPT uses 1e-5");
  }
  if (const nlohmann::json* v = r.find("scale_attn_weights"); v != nullptr && !is_true(*v)) {
    r.refuse("scale_attn_weights", *v,
             "shardwise's GPT scales attention's scores by 1/sqrt(head size), as true does");
  }
  if (const nlohmann::json* v = r.find("scale_attn_by_inverse_layer_idx");
      v != nullptr && !is_false(*v)) {
    r.refuse("scale_attn_by_inverse_layer_idx", *v,
             "shardwise's GPT does not scale attention by the layer's index");
  }
  for (const char* key : {"add_cross_attention", "is_encoder_decoder"}) {
    if (const nlohmann::json* v = r.find(key); v != nullptr && !is_false(*v)) {
      r.refuse(key, *v, "shardwise's GPT is a decoder without cross-attention");
    }
  }
  if (const nlohmann::json* v = r.find("n_special");
      v != nullptr && !(v->is_number_unsigned() && v->get<std::uint64_t>() == 0)) {
    r.refuse("n_special", *v,
             "shardwise's GPT has no special-token embeddings beside its vocabulary");
  }
  if (const nlohmann::json* v = r.find("tie_word_embeddings"); v != nullptr && !is_true(*v)) {
    r.refuse("tie_word_embeddings", *v, "shardwise's GPT ties them");
  }
  if (const nlohmann::json* v = r.find("pruned_heads");
      v != nullptr && !(v->is_object() && v->empty())) {
    r.refuse("pruned_heads", *v, "shardwise's GPT has every head of every layer");
  }
  if (const nlohmann::json* v = r.find("quantization_config")) {
    r.refuse("quantization_config", *v,
             "shardwise reads float weights; a quantized model is not computed");
  }
}

}  // namespace

GptConfig gpt_from_hf_config(const std::string& text, const std::string& what,
                             std::vector<std::string>& notes) {
  const nlohmann::json config = shardwise::detail::parse_json(text, what);
  detail::HfConfigReader r(config, what, "shardwise's GPT-2 reader");
  if (const nlohmann::json* v = r.find("model_type"); v != nullptr && *v != "gpt2") {
    r.refuse("model_type", *v, "expected \"gpt2\"");
  }
  // n_positions as GPT2Config takes it where a config leaves it out.
  GptConfig gpt{r.size("n_layer", kMaxLayers), r.size("n_head", kMaxDimension),
                r.size("n_embd", kMaxDimension), r.size("n_positions", kMaxDimension, 1024),
                r.size("vocab_size", kMaxDimension)};
  read_architecture(r, gpt);
  r.take({// Upcasts attention's scores to float32 in half-precision models: shardwise computes
          // them in float32 either way.
          "reorder_and_upcast_attn",
          // Dropouts (shardwise trains without dropout) and the heads of fine-tuning tasks.
          "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_first_dropout", "summary_type",
          "summary_use_proj", "summary_activation", "summary_proj_to_labels",
          "predict_special_tokens"});
  r.add_notes(notes);
  try {
    models::validate(gpt);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(what + ": " + e.what());
  }
  return gpt;
}

GptConfig gpt_from_hf_config(const std::string& text, const std::string& what) {
  std::vector<std::string> notes;
  return gpt_from_hf_config(text, what, notes);
}

std::shared_ptr<const train::ModelDefinition> HfGpt2Adapter::model_from_hf_config(
    const std::string& text, const std::string& what, std::vector<std::string>& notes) const {
  return std::make_shared<GptDefinition>(gpt_from_hf_config(text, what, notes));
}

}  // namespace shardwise::models

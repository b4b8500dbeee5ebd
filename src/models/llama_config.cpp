// The Llama family's configuration: presets, bounds, and its JSON in Hugging Face's names (the
// trainer's model file and transformers' config.json are one format; llama_config_reader.cpp
// reads it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {
namespace {

// Bounds that keep every size product far from overflow (docs/reliability.md); the planner's
// reading of a config.json bounds its sizes alike.
constexpr auto kMaxDimension = static_cast<std::size_t>(kMaxConfigDimension);
constexpr auto kMaxLayers = static_cast<std::size_t>(kMaxModelLayers);

LlamaConfig tiny() {
  LlamaConfig c;  // the defaults: 4 layers of 128, 4 heads of 32 sharing 2 key/value heads
  return c;
}

// transformers' Qwen2 (q, k and v biases) and Qwen3 (queries and keys normed, a head_dim other
// than hidden / heads) at llama-tiny's size.
LlamaConfig qwen2_tiny() {
  LlamaConfig c;
  c.variant = LlamaVariant::kQwen2;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000;
  c.tie_word_embeddings = true;
  return c;
}

LlamaConfig qwen3_tiny() {
  LlamaConfig c;
  c.variant = LlamaVariant::kQwen3;
  c.head_dim = 48;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000;
  return c;
}

// transformers' Mixtral (8 experts, 2 per token, renormalised) and Qwen3-MoE (8 experts, 2 per
// token, normed queries and keys, norm_topk_prob false) at llama-tiny's size, each expert as
// wide as a quarter of llama-tiny's MLP.
LlamaConfig mixtral_tiny() {
  LlamaConfig c;
  c.variant = LlamaVariant::kMixtral;
  c.rope_theta = 1000000;
  c.experts = 8;
  c.experts_per_token = 2;
  c.expert_width = 88;
  c.intermediate_size = c.expert_width;
  c.renormalize_routing = true;
  return c;
}

LlamaConfig qwen3_moe_tiny() {
  LlamaConfig c = qwen3_tiny();
  c.variant = LlamaVariant::kQwen3Moe;
  c.experts = 8;
  c.experts_per_token = 2;
  c.expert_width = 88;
  return c;
}

LlamaConfig smollm2_135m() {
  LlamaConfig c;
  c.n_layer = 30;
  c.hidden_size = 576;
  c.n_head = 9;
  c.n_kv_head = 3;
  c.head_dim = 64;
  c.intermediate_size = 1536;
  c.context_length = 8192;
  c.vocab_size = 49152;
  c.rope_theta = 100000;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace

namespace {

struct VariantNames {
  LlamaVariant variant;
  const char* name;
  const char* display;
};
constexpr VariantNames kVariants[] = {{LlamaVariant::kLlama, "llama", "Llama"},
                                      {LlamaVariant::kQwen2, "qwen2", "Qwen2"},
                                      {LlamaVariant::kQwen3, "qwen3", "Qwen3"},
                                      {LlamaVariant::kMixtral, "mixtral", "Mixtral"},
                                      {LlamaVariant::kQwen3Moe, "qwen3_moe", "Qwen3-MoE"}};

const VariantNames& names_of(LlamaVariant variant) {
  for (const VariantNames& names : kVariants) {
    if (names.variant == variant) return names;
  }
  return kVariants[0];
}

}  // namespace

std::string to_string(LlamaVariant variant) { return names_of(variant).name; }
std::string display_name(LlamaVariant variant) { return names_of(variant).display; }
bool has_experts(LlamaVariant variant) {
  return variant == LlamaVariant::kMixtral || variant == LlamaVariant::kQwen3Moe;
}

bool operator==(const LlamaConfig& a, const LlamaConfig& b) {
  return a.variant == b.variant && a.attention_bias == b.attention_bias && a.n_layer == b.n_layer &&
         a.hidden_size == b.hidden_size && a.n_head == b.n_head && a.n_kv_head == b.n_kv_head &&
         a.head_dim == b.head_dim && a.intermediate_size == b.intermediate_size &&
         a.context_length == b.context_length && a.vocab_size == b.vocab_size &&
         a.rope_theta == b.rope_theta && a.rope_scaling.factor == b.rope_scaling.factor &&
         a.rope_scaling.low_freq_factor == b.rope_scaling.low_freq_factor &&
         a.rope_scaling.high_freq_factor == b.rope_scaling.high_freq_factor &&
         a.rope_scaling.original_context == b.rope_scaling.original_context &&
         a.rms_norm_eps == b.rms_norm_eps && a.tie_word_embeddings == b.tie_word_embeddings &&
         a.experts == b.experts && a.experts_per_token == b.experts_per_token &&
         a.expert_width == b.expert_width && a.renormalize_routing == b.renormalize_routing &&
         a.router_aux_loss_coef == b.router_aux_loss_coef &&
         a.output_router_logits == b.output_router_logits && a.sparse_step == b.sparse_step &&
         a.mlp_only_layers == b.mlp_only_layers;
}

std::vector<std::size_t> LlamaConfig::dense_layers() const {
  std::vector<std::size_t> dense;
  if (!has_experts(variant)) return dense;
  for (std::size_t l = 0; l < n_layer; ++l) {
    const bool listed = std::find(mlp_only_layers.begin(), mlp_only_layers.end(),
                                  static_cast<std::int64_t>(l)) != mlp_only_layers.end();
    if (listed || sparse_step == 0 || (l + 1) % sparse_step != 0) dense.push_back(l);
  }
  return dense;
}

const std::vector<std::string>& llama_preset_names() {
  static const std::vector<std::string> names{"llama-tiny", "smollm2-135m", "qwen2-tiny",
                                              "qwen3-tiny", "mixtral-tiny", "qwen3-moe-tiny"};
  return names;
}

std::vector<std::string> llama_preset_names(LlamaVariant variant) {
  std::vector<std::string> names;
  for (const std::string& name : llama_preset_names()) {
    if (llama_preset(name, "preset").variant == variant) names.push_back(name);
  }
  return names;
}

LlamaConfig llama_preset(const std::string& name, const std::string& field) {
  if (name == "llama-tiny") return tiny();
  if (name == "smollm2-135m") return smollm2_135m();
  if (name == "qwen2-tiny") return qwen2_tiny();
  if (name == "qwen3-tiny") return qwen3_tiny();
  if (name == "mixtral-tiny") return mixtral_tiny();
  if (name == "qwen3-moe-tiny") return qwen3_moe_tiny();
  throw InvalidArgument(field + ": '" + echo_input(name) +
                        "' is not a Llama preset (llama-tiny, smollm2-135m, qwen2-tiny, "
                        "qwen3-tiny, mixtral-tiny, qwen3-moe-tiny)");
}

void validate(const LlamaConfig& c) {
  const auto check = [](std::size_t value, std::size_t most, const char* field) {
    if (value < 1 || value > most) {
      throw InvalidArgument(std::string(field) + " is " + std::to_string(value) +
                            "; expected 1 to " + std::to_string(most));
    }
  };
  check(c.n_layer, kMaxLayers, "num_hidden_layers");
  check(c.hidden_size, kMaxDimension, "hidden_size");
  check(c.n_head, kMaxDimension, "num_attention_heads");
  check(c.n_kv_head, kMaxDimension, "num_key_value_heads");
  check(c.head_dim, kMaxDimension, "head_dim");
  check(c.intermediate_size, kMaxDimension, "intermediate_size");
  check(c.context_length, kMaxDimension, "max_position_embeddings");
  check(c.vocab_size, kMaxDimension, "vocab_size");
  check(c.n_head * c.head_dim, kMaxDimension, "num_attention_heads x head_dim");
  if (has_experts(c.variant)) {
    check(c.experts, kMaxDimension, "num_experts");
    check(c.experts_per_token, c.experts, "num_experts_per_tok");
    check(c.expert_width, kMaxDimension, "moe_intermediate_size");
    check(c.sparse_step, kMaxDimension, "decoder_sparse_step");
    for (const std::int64_t layer : c.mlp_only_layers) {
      if (layer < 0) {
        throw InvalidArgument("mlp_only_layers holds " + std::to_string(layer) +
                              "; expected layers from 0");
      }
    }
    if (c.dense_layers().size() == c.n_layer) {
      throw InvalidArgument("decoder_sparse_step " + std::to_string(c.sparse_step) +
                            " and mlp_only_layers leave none of the " + std::to_string(c.n_layer) +
                            " layers routed: the model has no Mixture of Experts");
    }
    if (!(c.router_aux_loss_coef >= 0 && c.router_aux_loss_coef <= 1e6)) {
      throw InvalidArgument("router_aux_loss_coef is " + std::to_string(c.router_aux_loss_coef) +
                            "; expected a weight from 0 to 1e6");
    }
  } else if (c.experts != 0) {
    throw InvalidArgument("a " + display_name(c.variant) + " has no experts; " +
                          std::to_string(c.experts) + " were given");
  }
  if (c.head_dim % 2 != 0) {
    throw InvalidArgument("head_dim is " + std::to_string(c.head_dim) +
                          "; rotary embeddings rotate pairs, so it must be even");
  }
  if (c.n_head % c.n_kv_head != 0) {
    throw InvalidArgument("num_attention_heads " + std::to_string(c.n_head) +
                          " is not a multiple of num_key_value_heads " +
                          std::to_string(c.n_kv_head));
  }
  for (const auto& [value, field] :
       {std::pair{c.rope_theta, "rope_theta"}, {c.rms_norm_eps, "rms_norm_eps"}}) {
    if (!std::isfinite(value) || value <= 0) {
      throw InvalidArgument(std::string(field) + " is " + std::to_string(value) +
                            "; expected a finite positive number");
    }
  }
  const kernels::RotaryScaling& s = c.rope_scaling;
  if (s.factor != 0 &&
      !(std::isfinite(s.factor) && s.factor > 0 && std::isfinite(s.low_freq_factor) &&
        s.low_freq_factor > 0 && std::isfinite(s.high_freq_factor) &&
        s.high_freq_factor > s.low_freq_factor && std::isfinite(s.original_context) &&
        s.original_context > 0)) {
    throw InvalidArgument(
        "rope_scaling needs a finite positive factor, low_freq_factor < "
        "high_freq_factor and original_max_position_embeddings");
  }
}

std::string llama_config_json(const LlamaConfig& c, bool with_family) {
  nlohmann::json json{{"vocab_size", c.vocab_size},
                      {"hidden_size", c.hidden_size},
                      {"intermediate_size", c.intermediate_size},
                      {"num_hidden_layers", c.n_layer},
                      {"num_attention_heads", c.n_head},
                      {"num_key_value_heads", c.n_kv_head},
                      {"head_dim", c.head_dim},
                      {"max_position_embeddings", c.context_length},
                      {"rope_theta", c.rope_theta},
                      {"rms_norm_eps", c.rms_norm_eps},
                      {"tie_word_embeddings", c.tie_word_embeddings},
                      {"rope_scaling", nullptr}};
  if (c.rope_scaling.factor != 0) {
    json["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", c.rope_scaling.factor},
                            {"low_freq_factor", c.rope_scaling.low_freq_factor},
                            {"high_freq_factor", c.rope_scaling.high_freq_factor},
                            {"original_max_position_embeddings",
                             static_cast<std::int64_t>(c.rope_scaling.original_context)}};
  }
  const std::string type = to_string(c.variant);
  if (c.variant == LlamaVariant::kMixtral) {
    // Mixtral's experts are intermediate_size wide and always renormalised.
    json["intermediate_size"] = c.expert_width;
    json["num_local_experts"] = c.experts;
    json["num_experts_per_tok"] = c.experts_per_token;
    json["router_aux_loss_coef"] = c.router_aux_loss_coef;
    json["output_router_logits"] = c.output_router_logits;
  } else if (c.variant == LlamaVariant::kQwen3Moe) {
    json["num_experts"] = c.experts;
    json["num_experts_per_tok"] = c.experts_per_token;
    json["moe_intermediate_size"] = c.expert_width;
    json["norm_topk_prob"] = c.renormalize_routing;
    json["decoder_sparse_step"] = c.sparse_step;
    json["mlp_only_layers"] = c.mlp_only_layers;
    // The dense layers' width (intermediate_size, written above) and the experts' differ.
    json["router_aux_loss_coef"] = c.router_aux_loss_coef;
    json["output_router_logits"] = c.output_router_logits;
  }
  // Qwen2 has its biases whatever the field says: transformers' Qwen2Config has none. The
  // trainer's own file names it only where it is set.
  if (c.variant != LlamaVariant::kQwen2 && c.variant != LlamaVariant::kMixtral &&
      (!with_family || c.attention_bias)) {
    json["attention_bias"] = c.attention_bias;
  }
  if (with_family) {
    json["family"] = type;
  } else {
    static const std::map<std::string, std::string> architectures{
        {"llama", "LlamaForCausalLM"},
        {"qwen2", "Qwen2ForCausalLM"},
        {"qwen3", "Qwen3ForCausalLM"},
        {"mixtral", "MixtralForCausalLM"},
        {"qwen3_moe", "Qwen3MoeForCausalLM"}};
    json["model_type"] = type;
    json["architectures"] = {architectures.at(type)};
    json["hidden_act"] = "silu";
    if (c.variant == LlamaVariant::kLlama) json["mlp_bias"] = false;
    if (c.variant == LlamaVariant::kQwen2 || c.variant == LlamaVariant::kQwen3 ||
        c.variant == LlamaVariant::kQwen3Moe) {
      json["use_sliding_window"] = false;
    }
    if (c.variant == LlamaVariant::kMixtral) json["sliding_window"] = nullptr;
    if (has_experts(c.variant)) {
      // The auxiliary loss is not added to the loss shardwise trains (as transformers' default).
      json["output_router_logits"] = false;
    }
    json["attention_dropout"] = 0.0;
    json["initializer_range"] = 0.02;
    json["torch_dtype"] = "float32";
  }
  return json.dump(2) + "\n";
}

bool is_llama_config(std::string_view text, LlamaVariant variant) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object()) return false;
  const auto it = json.find("family");
  return it != json.end() && it->is_string() && it->get<std::string>() == to_string(variant);
}

bool is_llama_config(std::string_view text) { return is_llama_config(text, LlamaVariant::kLlama); }

}  // namespace shardwise::models

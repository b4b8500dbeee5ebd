// The Llama family's reader of a config in Hugging Face's LlamaConfig names: transformers'
// config.json of a Llama or a Mistral (model_type "llama" or "mistral"), as transformers 4 and 5
// write it, or the trainer's own model file ("family": "llama").
#include <optional>
#include <string>
#include <string_view>

#include "../detail/json_reader.hpp"
#include "detail/hf_config_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {
namespace {

constexpr auto kMaxDimension = static_cast<std::size_t>(kMaxConfigDimension);
constexpr auto kMaxLayers = static_cast<std::size_t>(kMaxModelLayers);

// What a model_type's transformers class takes where its config.json leaves a field out.
struct TypeDefaults {
  std::optional<std::size_t> kv_heads;  // none: as many as the query heads
  std::size_t context = 2048;
  std::optional<std::size_t> sliding_window;
};

TypeDefaults defaults_of(const std::string& type) {
  if (type == "mistral") return {8, 131072, 4096};  // MistralConfig's (Mistral-7B's) defaults
  if (type == "mixtral") return {8, 131072, std::nullopt};                     // MixtralConfig's
  if (type == "qwen3_moe") return {4, 32768, 4096};                            // Qwen3MoeConfig's
  if (type == "qwen2" || type == "qwen3") return {std::nullopt, 32768, 4096};  // Qwen2Config's
  return {};                                                                   // LlamaConfig's
}

// The family of a model_type or a trainer's file's "family".
LlamaVariant variant_of(const std::string& type) {
  if (type == "qwen2") return LlamaVariant::kQwen2;
  if (type == "qwen3") return LlamaVariant::kQwen3;
  if (type == "mixtral") return LlamaVariant::kMixtral;
  if (type == "qwen3_moe") return LlamaVariant::kQwen3Moe;
  return LlamaVariant::kLlama;
}

// The experts of Mixtral (num_local_experts, or num_experts as its attribute_map reads it, of
// intermediate_size, always renormalised) and Qwen3-MoE (num_experts of moe_intermediate_size,
// renormalised where norm_topk_prob), with transformers' defaults, and the auxiliary
// load-balancing loss (router_aux_loss_coef, added where output_router_logits), and Qwen3-MoE's
// dense layers among the routed (decoder_sparse_step, mlp_only_layers). Router jitter (noise on
// the training inputs), which shardwise does not compute, is refused.
void read_experts(detail::HfConfigReader& r, LlamaConfig& c) {
  // transformers 5 writes num_local_experts for both (num_experts is its alias); Qwen3-MoE's
  // published files, from transformers 4, say num_experts.
  const bool mixtral = c.variant == LlamaVariant::kMixtral;
  const std::size_t fallback = mixtral ? 8 : 128;
  const bool local = r.find("num_local_experts") != nullptr;
  c.experts = r.size(local ? "num_local_experts" : "num_experts", kMaxDimension, fallback);
  if (local && r.find("num_experts") != nullptr &&
      r.size("num_experts", kMaxDimension) != c.experts) {
    r.refuse("num_experts", *r.find("num_experts"),
             "it differs from num_local_experts " + std::to_string(c.experts) +
                 ", which transformers reads as the same setting");
  }
  if (mixtral) {
    c.experts_per_token = r.size("num_experts_per_tok", kMaxDimension, 2);
    c.expert_width = c.intermediate_size;
    c.renormalize_routing = true;
    if (const nlohmann::json* v = r.find("router_jitter_noise");
        v != nullptr && !(v->is_number() && v->get<double>() == 0)) {
      r.refuse("router_jitter_noise", *v,
               "shardwise's Mixtral routes the inputs as they are (0): jitter is not computed");
    }
  } else {
    c.experts_per_token = r.size("num_experts_per_tok", kMaxDimension, 8);
    c.expert_width = r.size("moe_intermediate_size", kMaxDimension, 768);
    c.renormalize_routing = r.flag("norm_topk_prob", false);
    c.sparse_step = r.size("decoder_sparse_step", kMaxDimension, 1);
    if (const nlohmann::json* v = r.find("mlp_only_layers"); v != nullptr && !v->is_null()) {
      if (!v->is_array()) r.refuse("mlp_only_layers", *v, "expected a list of layers");
      for (const nlohmann::json& layer : *v) {
        // A layer past the last is no layer of the model: transformers leaves it unused.
        if (!layer.is_number_integer() || layer.get<std::int64_t>() < 0) {
          r.refuse("mlp_only_layers", *v, "expected layers from 0");
        }
        c.mlp_only_layers.push_back(layer.get<std::int64_t>());
      }
    }
  }
  if (c.experts_per_token > c.experts) {
    r.refuse("num_experts_per_tok", c.experts_per_token,
             "more than the " + std::to_string(c.experts) + " experts");
  }
  c.output_router_logits = r.flag("output_router_logits", false);
  if (const nlohmann::json* v = r.find("router_aux_loss_coef")) {
    if (!v->is_number() || !(v->get<double>() >= 0 && v->get<double>() <= 1e6)) {
      r.refuse("router_aux_loss_coef", *v, "expected a weight from 0 to 1e6");
    }
    c.router_aux_loss_coef = v->get<double>();
  }
}

// One rotary object (rope_scaling or rope_parameters), as transformers 5 reads it.
struct Rope {
  std::string type = "default";
  std::optional<double> theta;
  kernels::RotaryScaling scaling;  // factor 0: unscaled

  // Whether two objects compute alike, a theta left out being `top`.
  [[nodiscard]] bool same(const Rope& other, double top) const {
    return type == other.type && theta.value_or(top) == other.theta.value_or(top) &&
           scaling.factor == other.scaling.factor &&
           scaling.low_freq_factor == other.scaling.low_freq_factor &&
           scaling.high_freq_factor == other.scaling.high_freq_factor &&
           scaling.original_context == other.scaling.original_context;
  }
};

// Its type: "rope_type" where given, else the older "type" (transformers 5 reads them in that
// order; transformers 4's LlamaConfig copied "type" over "rope_type"); a note where both are
// given and differ.
std::string rope_type(detail::HfConfigReader& r, const std::string& key, const nlohmann::json& rope,
                      std::vector<std::string>& notes) {
  for (const char* name : {"rope_type", "type"}) {
    if (rope.contains(name) && !rope[name].is_string()) {
      r.refuse(key, rope, std::string("its \"") + name + "\" is no name");
    }
  }
  if (!rope.contains("rope_type")) return rope.value("type", "default");
  const std::string type = rope["rope_type"].get<std::string>();
  if (rope.contains("type") && rope["type"].get<std::string>() != type) {
    r.note(notes, r.what() + ": \"" + key + "\" holds \"rope_type\": \"" + echo_input(type, 40) +
                      "\" and \"type\": \"" + echo_input(rope["type"].get<std::string>(), 40) +
                      "\"; read as \"" + echo_input(type, 40) +
                      "\", as transformers 5 reads it (transformers 4 read \"type\")");
  }
  return type;
}

Rope read_rope(detail::HfConfigReader& r, const std::string& key, const nlohmann::json& rope,
               bool strict, std::vector<std::string>& notes) {
  if (!rope.is_object()) r.refuse(key, rope, "expected an object or null");
  Rope out;
  out.type = rope_type(r, key, rope, notes);
  if (out.type != "default" && out.type != "llama3") {
    r.refuse(key, rope,
             "shardwise's Llama computes rotary embeddings unscaled (\"default\") or with "
             "\"llama3\"'s scaling");
  }
  static const std::set<std::string> common{"rope_type", "type", "rope_theta",
                                            "partial_rotary_factor"};
  static const std::set<std::string> llama3{"factor", "low_freq_factor", "high_freq_factor",
                                            "original_max_position_embeddings"};
  for (const auto& item : rope.items()) {
    if (common.count(item.key()) != 0 || (out.type == "llama3" && llama3.count(item.key()) != 0)) {
      continue;
    }
    const std::string field = echo_input(item.key(), 40);
    if (strict) r.refuse(key, rope, "its \"" + field + "\" is not a field of type " + out.type);
    // transformers' rotary functions read only their type's fields.
    r.note(notes, r.what() + ": field '" + key + "." + field + "' is not read for rotary type " +
                      out.type + "; taken as not changing the computation");
  }
  if (const auto it = rope.find("partial_rotary_factor");
      it != rope.end() && !it->is_null() && *it != 1.0) {
    r.refuse(key, rope,
             "its \"partial_rotary_factor\" is " + echo_input(it->dump(), 20) +
                 ": shardwise's Llama rotates every dimension of a head (1.0)");
  }
  if (rope.contains("rope_theta") && !rope["rope_theta"].is_null()) {
    out.theta = detail::nested_positive(r, key, rope, "rope_theta", 0, true);
  }
  if (out.type == "default") return out;
  kernels::RotaryScaling& s = out.scaling;
  s.factor = detail::nested_positive(r, key, rope, "factor", 0, true);
  s.low_freq_factor = detail::nested_positive(r, key, rope, "low_freq_factor", 0, true);
  s.high_freq_factor = detail::nested_positive(r, key, rope, "high_freq_factor", 0, true);
  s.original_context =
      detail::nested_positive(r, key, rope, "original_max_position_embeddings", 0, true);
  if (s.high_freq_factor <= s.low_freq_factor) {
    r.refuse(key, rope, "high_freq_factor must exceed low_freq_factor");
  }
  return out;
}

// rope_theta, rope_scaling (transformers 4) and rope_parameters (transformers 5, which holds
// rope_theta too): where both objects are given transformers reads rope_scaling, and a
// rope_theta inside it before the top level's; where the two differ, versions of transformers
// would compute differently, so it is refused.
void read_rotary(detail::HfConfigReader& r, bool strict, LlamaConfig& c,
                 std::vector<std::string>& notes) {
  const bool has_top = r.find("rope_theta") != nullptr;
  const double top = r.positive("rope_theta", 10000);
  std::optional<Rope> scaling;
  std::optional<Rope> parameters;
  // An empty object is none (transformers 5: `rope_scaling or rope_parameters`).
  if (const nlohmann::json* v = r.find("rope_scaling");
      v != nullptr && *v != nlohmann::json::object()) {
    scaling = read_rope(r, "rope_scaling", *v, strict, notes);
  }
  if (const nlohmann::json* v = r.find("rope_parameters");
      v != nullptr && *v != nlohmann::json::object()) {
    parameters = read_rope(r, "rope_parameters", *v, strict, notes);
  }
  if (scaling && parameters && !scaling->same(*parameters, top)) {
    r.refuse("rope_parameters", r.json()["rope_parameters"],
             "it disagrees with \"rope_scaling\" " +
                 echo_input(r.json()["rope_scaling"].dump(), 200) +
                 ", which transformers reads in its place");
  }
  const Rope rope = scaling ? *scaling : parameters.value_or(Rope{});
  if (has_top && rope.theta && top != *rope.theta) {
    r.refuse("rope_theta", r.json()["rope_theta"],
             "the rotary object's rope_theta is " + std::to_string(*rope.theta) +
                 " (transformers 5 reads that one, transformers 4 this one)");
  }
  c.rope_theta = rope.theta.value_or(top);
  c.rope_scaling = rope.scaling;
  if (const nlohmann::json* v = r.find("partial_rotary_factor"); v != nullptr && *v != 1.0) {
    r.refuse("partial_rotary_factor", *v,
             "shardwise's Llama rotates every dimension of a head (1.0)");
  }
  if (r.flag("rope_interleaved", false)) {
    r.refuse("rope_interleaved", true,
             "shardwise's Llama rotates the two halves of each head against each other, as "
             "transformers' Llama does; interleaved pairs are not computed");
  }
}

// sliding_window (Mistral's): attention to the last `window` tokens. A window no shorter than the
// context the model is used with changes nothing; a shorter one is refused.
void read_window(detail::HfConfigReader& r, const TypeDefaults& defaults, const LlamaConfig& c) {
  // layer_types (transformers 5) names each layer's attention: every one must attend to all.
  if (const nlohmann::json* v = r.find("layer_types"); v != nullptr && !v->is_null()) {
    if (!v->is_array()) r.refuse("layer_types", *v, "expected a list of attention types");
    for (std::size_t l = 0; l < v->size(); ++l) {
      if ((*v)[l] != "full_attention") {
        r.refuse("layer_types", *v,
                 "layer " + std::to_string(l) + " is " + echo_input((*v)[l].dump(), 40) +
                     ": shardwise computes full attention (\"full_attention\") in every layer");
      }
    }
  }
  // Qwen2's and Qwen3's switch: without it transformers sets no window at all.
  if (c.variant != LlamaVariant::kLlama && c.variant != LlamaVariant::kMixtral) {
    const bool used = r.flag("use_sliding_window", false);
    r.take({"max_window_layers"});
    if (!used) {
      r.take({"sliding_window"});
      return;
    }
  } else {
    (void)r.flag("use_sliding_window", false);
  }
  const nlohmann::json* v = r.find("sliding_window");
  const bool given = v != nullptr;
  // null says "no window"; only a config without the field takes the type's default.
  if (!given && r.json().contains("sliding_window")) return;
  if (given && !(v->is_number_integer() && v->get<std::int64_t>() >= 1)) {
    r.refuse("sliding_window", *v, "expected null or a number of tokens");
  }
  const std::optional<std::size_t> window =
      given ? std::optional(v->get<std::size_t>()) : defaults.sliding_window;
  if (!window || *window >= c.context_length) return;
  const std::string size = std::to_string(*window);
  const std::string why = "sliding_window " + size + " is below max_position_embeddings " +
                          std::to_string(c.context_length) +
                          ": attention limited to a window is not computed by shardwise's Llama";
  if (given) r.refuse("sliding_window", *v, why);
  throw InvalidArgument(r.what() + ": \"sliding_window\" is missing, which transformers' " +
                        "Mistral reads as " + size + "; " + why);
}

// Fields that would ask for another network: refused where they do.
void read_architecture(detail::HfConfigReader& r, LlamaConfig& c) {
  // Biases on q, k, v and o where asked (Llama, Qwen3); transformers' Qwen2 has them on q, k
  // and v whatever the field says, and reads no such field.
  if (c.variant == LlamaVariant::kQwen2 || c.variant == LlamaVariant::kMixtral) {
    // (Mixtral's attention has no biases, and its config no such field.)
    r.take({"attention_bias"});
  } else {
    c.attention_bias = r.flag("attention_bias", false);
  }
  if (const nlohmann::json* v = r.find("hidden_act");
      v != nullptr && *v != "silu" && *v != "swish") {
    r.refuse("hidden_act", *v,
             "shardwise's Llama computes SwiGLU with SiLU (\"silu\", also called \"swish\")");
  }
  r.require_flag("mlp_bias", false, "shardwise's Llama has no MLP biases");
  for (const char* key : {"is_encoder_decoder", "add_cross_attention"}) {
    r.require_flag(key, false, "shardwise's Llama is a decoder without cross-attention");
  }
  if (const nlohmann::json* v = r.find("pruned_heads");
      v != nullptr && !(v->is_object() && v->empty())) {
    r.refuse("pruned_heads", *v, "shardwise's Llama has every head of every layer");
  }
  if (const nlohmann::json* v = r.find("quantization_config")) {
    r.refuse("quantization_config", *v,
             "shardwise reads float weights; a quantized model is not computed");
  }
  // Settings of the architectures a Llama's file is most often mistaken for (Qwen3's and OLMo's
  // norms of queries and keys, Gemma's soft-capping and scalars, Granite's multipliers, experts):
  // known to change the computation, so refused by name rather than taken with a note.
  const bool experts = has_experts(c.variant);
  for (const char* key :
       {"qk_layernorm", "use_qk_norm", "qk_norm", "attn_logit_softcapping",
        "final_logit_softcapping", "query_pre_attn_scalar", "embedding_multiplier",
        "residual_multiplier", "attention_multiplier", "logits_scaling", "num_local_experts",
        "num_experts", "n_routed_experts", "num_experts_per_tok", "no_rope_layers"}) {
    // A Mixture of Experts' own fields are read in read_experts.
    if (experts && r.json().contains(key) && std::string_view(key) != "n_routed_experts" &&
        std::string_view(key).find("experts") != std::string_view::npos) {
      continue;
    }
    const nlohmann::json* v = r.find(key);
    // Absent, null, false and 0 (no experts) ask for nothing; a scaling of 1 scales nothing.
    const bool scaling = std::string_view(key) == "embedding_multiplier" ||
                         std::string_view(key) == "residual_multiplier" ||
                         std::string_view(key) == "logits_scaling";
    const bool neutral = v == nullptr || v->is_null() || (v->is_boolean() && !v->get<bool>()) ||
                         (v->is_number() && v->get<double>() == (scaling ? 1.0 : 0.0));
    if (!neutral) {
      r.refuse(key, *v, "a setting of another architecture; shardwise's Llama does not compute it");
    }
  }
  // Computed alike at any value: tensor-parallel slices of pretraining (sums of the same
  // products), dropout (shardwise trains without it), nanotron's marker of a Llama.
  r.take({"pretraining_tp", "attention_dropout", "is_llama_config"});
}

}  // namespace

LlamaConfig llama_config_from_json(std::string_view text, const std::string& what,
                                   std::vector<std::string>& notes) {
  const nlohmann::json json = shardwise::detail::parse_json(text, what);
  detail::HfConfigReader r(json, what, "shardwise's Llama reader");
  // The trainer's own file says "family"; an unknown field there is a typo, refused.
  const bool own_file = json.contains("family");
  std::string type = "llama";
  if (const nlohmann::json* v = r.find("family")) {
    if (*v != "llama" && *v != "qwen2" && *v != "qwen3" && *v != "mixtral" && *v != "qwen3_moe") {
      r.refuse("family", *v,
               "expected \"llama\", \"qwen2\", \"qwen3\", \"mixtral\" or \"qwen3_moe\"");
    }
    type = v->get<std::string>();
  }
  if (const nlohmann::json* v = r.find("model_type")) {
    if (*v != "llama" && *v != "mistral" && *v != "qwen2" && *v != "qwen3" && *v != "mixtral" &&
        *v != "qwen3_moe") {
      r.refuse("model_type", *v,
               "expected \"llama\", \"mistral\", \"qwen2\", \"qwen3\", \"mixtral\" or "
               "\"qwen3_moe\"");
    }
    type = v->get<std::string>();
  }
  const TypeDefaults defaults = defaults_of(type);
  LlamaConfig c;
  c.variant = variant_of(type);
  c.vocab_size = r.size("vocab_size", kMaxDimension);
  c.hidden_size = r.size("hidden_size", kMaxDimension);
  c.intermediate_size = r.size("intermediate_size", kMaxDimension);
  c.n_layer = r.size("num_hidden_layers", kMaxLayers);
  c.n_head = r.size("num_attention_heads", kMaxDimension);
  c.n_kv_head = r.size("num_key_value_heads", kMaxDimension, defaults.kv_heads.value_or(c.n_head));
  // Qwen3Config's head_dim is 128 where left out; the others' hidden_size / heads.
  const bool head_dim_default = c.variant != LlamaVariant::kQwen3;
  // (MixtralConfig and Qwen3MoeConfig leave head_dim null: hidden_size / heads.)
  if (head_dim_default && r.find("head_dim") == nullptr && c.hidden_size % c.n_head != 0) {
    throw InvalidArgument(what + ": \"hidden_size\" " + std::to_string(c.hidden_size) +
                          " is not divisible by \"num_attention_heads\" " +
                          std::to_string(c.n_head) + " and no \"head_dim\" is given");
  }
  c.head_dim = r.size("head_dim", kMaxDimension, head_dim_default ? c.hidden_size / c.n_head : 128);
  c.context_length = r.size("max_position_embeddings", kMaxDimension, defaults.context);
  c.rms_norm_eps = r.positive("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = r.flag("tie_word_embeddings", false);
  read_rotary(r, own_file, c, notes);
  read_window(r, defaults, c);
  if (has_experts(c.variant)) read_experts(r, c);
  read_architecture(r, c);
  if (own_file) {
    r.refuse_unknown("shardwise's Llama");
  } else {
    r.add_notes(notes);
  }
  try {
    validate(c);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(what + ": " + e.what());
  }
  return c;
}

LlamaConfig llama_config_from_json(std::string_view text, const std::string& what) {
  std::vector<std::string> notes;
  return llama_config_from_json(text, what, notes);
}

}  // namespace shardwise::models

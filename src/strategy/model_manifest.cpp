#include "shardwise/strategy/model_manifest.hpp"

#include <set>

#include "detail/json_reader.hpp"
#include "detail/model_description_json.hpp"
#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

void check_parameter(const ParameterInfo& p) {
  for (std::size_t d = 0; d < p.shape.size(); ++d) {
    if (p.shape[d] < 0) {
      throw InvalidArgument("parameter '" + echo_input(p.name) + "' dimension " +
                            std::to_string(d) + " has size " + std::to_string(p.shape[d]) +
                            "; expected >= 0");
    }
  }
  // Its bytes must be countable: elements times the dtype's size in 64 bits.
  (void)checked_multiply(
      num_elements(p.shape), static_cast<std::int64_t>(size_in_bytes(p.dtype)),
      "parameter '" + echo_input(p.name) + "' of shape " + to_string(p.shape) + " in bytes");
  if (p.logical_axes && p.logical_axes->size() != p.shape.size()) {
    throw InvalidArgument("parameter '" + p.name + "' has " +
                          std::to_string(p.logical_axes->size()) + " logical axes for shape " +
                          to_string(p.shape));
  }
}

ParameterInfo parameter_from_json(const nlohmann::json& json, const std::string& path) {
  detail::JsonObjectReader reader(json, path);
  ParameterInfo p;
  p.name = reader.required_string("name");
  const std::string shape_field = reader.field("shape");
  for (std::int64_t size : detail::json_integer_list(reader.required("shape"), shape_field)) {
    p.shape.push_back(size);
  }
  p.dtype = parse_dtype(reader.string("dtype", "f32"));
  if (const nlohmann::json* axes = reader.optional("logical_axes"); axes && !axes->is_null()) {
    p.logical_axes = detail::json_name_list(*axes, reader.field("logical_axes"));
  }
  reader.finish();
  return p;
}

void require_positive(const std::string& model, const char* key, std::int64_t value) {
  if (value < 1) {
    throw InvalidArgument(model + " config '" + key + "' is " + std::to_string(value) +
                          "; expected >= 1");
  }
}

void require_layers(const std::string& model, const char* key, std::int64_t value) {
  require_positive(model, key, value);
  if (value > kMaxModelLayers) {
    throw InvalidArgument(model + " config '" + key + "' is " + std::to_string(value) +
                          "; at most " + std::to_string(kMaxModelLayers) + " layers are laid out");
  }
}

// The finished manifest, its byte count checked, so that no product of config sizes wrapped.
ModelManifest checked_manifest(ModelManifest manifest, const std::string& model) {
  for (const ParameterInfo& p : manifest.parameters) {
    (void)checked_multiply(num_elements(p.shape), static_cast<std::int64_t>(size_in_bytes(p.dtype)),
                           model + " parameter '" + p.name + "' of shape " + to_string(p.shape));
  }
  (void)manifest.num_bytes();
  return manifest;
}

// Builds parameter lists.
class ManifestBuilder {
 public:
  explicit ManifestBuilder(DType dtype) : dtype_(dtype) {}
  void add(std::string name, Shape shape) {
    manifest_.parameters.push_back({std::move(name), std::move(shape), dtype_, std::nullopt});
  }
  ModelManifest take() { return std::move(manifest_); }

 private:
  DType dtype_;
  ModelManifest manifest_;
};

AxisUnits axis_units_from_json(const nlohmann::json& json) {
  if (!json.is_object()) {
    throw ParseError(
        "field 'axis_units' must be an object of logical axis names to unit sizes, "
        "not " +
        detail::json_type_name(json));
  }
  AxisUnits units;
  for (const auto& [name, value] : json.items()) {
    const std::int64_t unit = detail::json_integer(value, "axis_units." + name);
    if (unit < 1) {
      throw InvalidArgument("field 'axis_units." + name + "' is " + std::to_string(unit) +
                            "; expected at least 1 element");
    }
    units[name] = unit;
  }
  return units;
}

std::int64_t optional_integer(const nlohmann::json& json, const char* key, std::int64_t fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  return detail::json_integer(*it, key);
}

std::int64_t required_integer(const nlohmann::json& json, const char* key,
                              const std::string& model) {
  auto it = json.find(key);
  if (it == json.end()) {
    throw ParseError(model + " config.json has no '" + std::string(key) + "'");
  }
  return detail::json_integer(*it, key);
}

bool optional_bool(const nlohmann::json& json, const char* key, bool fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    throw ParseError("field '" + std::string(key) + "' must be true or false, not " +
                     detail::json_type_name(*it));
  }
  return it->get<bool>();
}

// "dtype" (transformers 5) or "torch_dtype" (transformers 4); transformers keeps "dtype" where
// a config holds both.
DType config_dtype(const nlohmann::json& json) {
  for (const char* key : {"dtype", "torch_dtype"}) {
    auto it = json.find(key);
    if (it != json.end() && !it->is_null()) return parse_dtype(detail::json_string(*it, key));
  }
  return DType::kF32;
}

// A config.json's size, bounded as the models' readers bound it (kMaxConfigDimension): the
// planner and the trainer accept the same files.
std::int64_t bounded(std::int64_t value, const char* key, const std::string& model) {
  if (value > kMaxConfigDimension) {
    throw InvalidArgument(model + " config '" + key + "' is " + std::to_string(value) +
                          "; at most " + std::to_string(kMaxConfigDimension) + " is read");
  }
  return value;
}

}  // namespace

std::int64_t ModelManifest::num_parameters() const {
  std::int64_t count = 0;
  for (const ParameterInfo& p : parameters) {
    count = checked_add(count, num_elements(p.shape), "the model's parameter count");
  }
  return count;
}

std::int64_t ModelManifest::num_bytes() const {
  std::int64_t bytes = 0;
  for (const ParameterInfo& p : parameters) {
    bytes = checked_add(
        bytes,
        checked_multiply(num_elements(p.shape), static_cast<std::int64_t>(size_in_bytes(p.dtype)),
                         "parameter bytes"),
        "the model's parameter bytes");
  }
  return bytes;
}

namespace {

// The kinds of a transformer's parts by their names in a manifest's "transformer".
template <class Kind>
struct KindName {
  const char* name;
  Kind kind;
};
constexpr KindName<PositionKind> kPositionNames[] = {{"learned", PositionKind::kLearned},
                                                     {"rotary", PositionKind::kRotary}};
constexpr KindName<NormKind> kNormNames[] = {{"layernorm", NormKind::kLayerNorm},
                                             {"rmsnorm", NormKind::kRmsNorm}};
constexpr KindName<MlpKind> kMlpNames[] = {{"gelu", MlpKind::kGelu},
                                           {"gated_silu", MlpKind::kGatedSilu}};

template <class Kind, std::size_t N>
const char* kind_name(Kind kind, const KindName<Kind> (&names)[N]) {
  for (const auto& entry : names) {
    if (entry.kind == kind) return entry.name;
  }
  return "?";
}

template <class Kind, std::size_t N>
Kind kind_of(detail::JsonObjectReader& reader, const std::string& key,
             const KindName<Kind> (&names)[N]) {
  const std::string text = reader.required_string(key);
  std::string known;
  for (const auto& entry : names) {
    if (text == entry.name) return entry.kind;
    known += std::string(known.empty() ? "" : ", ") + entry.name;
  }
  throw InvalidArgument(reader.field(key) + " is '" + echo_input(text) + "'; expected one of " +
                        known);
}

nlohmann::ordered_json transformer_json(const TransformerShape& t) {
  nlohmann::ordered_json json = {{"layers", t.layers},
                                 {"hidden", t.hidden},
                                 {"heads", t.heads},
                                 {"kv_heads", t.kv_heads},
                                 {"head_dim", t.head_dim},
                                 {"mlp_width", t.mlp_width},
                                 {"vocab", t.vocab},
                                 {"context", t.context},
                                 {"positions", kind_name(t.positions, kPositionNames)},
                                 {"norm", kind_name(t.norm, kNormNames)},
                                 {"mlp", kind_name(t.mlp, kMlpNames)},
                                 {"fused_qkv", t.fused_qkv},
                                 {"qkv_bias", t.qkv_bias},
                                 {"attention_output_bias", t.attention_output_bias},
                                 {"mlp_bias", t.mlp_bias},
                                 {"qk_norm", t.qk_norm},
                                 {"tied_head", t.tied_head}};
  // A Mixture of Experts' routing; a dense shape's JSON names none of it.
  if (t.moe()) {
    json["experts"] = t.experts;
    json["experts_per_token"] = t.experts_per_token;
    json["expert_width"] = t.expert_width;
    json["renormalize_routing"] = t.renormalize_routing;
    if (t.aux_loss) json["aux_loss"] = true;
    if (!t.dense_layers.empty()) json["dense_layers"] = t.dense_layers;
  }
  return json;
}

// Every key required, sizes within a config.json's bounds, key/value heads dividing the heads:
// a shape the planner sizes activations from is one a family could state.
TransformerShape transformer_of_json(const nlohmann::json& json) {
  detail::JsonObjectReader reader(json, "transformer");
  TransformerShape t;
  const auto size = [&](const char* key, std::int64_t most) {
    const std::int64_t value = reader.required_integer(key);
    if (value < 1 || value > most) {
      throw InvalidArgument(reader.field(key) + " is " + std::to_string(value) +
                            "; expected 1 to " + std::to_string(most));
    }
    return static_cast<std::size_t>(value);
  };
  const auto flag = [&](const char* key) {
    const nlohmann::json& value = reader.required(key);
    if (!value.is_boolean()) {
      throw ParseError(reader.field(key) + " must be true or false, not " +
                       detail::json_type_name(value));
    }
    return value.get<bool>();
  };
  t.layers = size("layers", kMaxModelLayers);
  t.hidden = size("hidden", kMaxConfigDimension);
  t.heads = size("heads", kMaxConfigDimension);
  t.kv_heads = size("kv_heads", kMaxConfigDimension);
  t.head_dim = size("head_dim", kMaxConfigDimension);
  t.mlp_width = size("mlp_width", kMaxConfigDimension);
  t.vocab = size("vocab", kMaxConfigDimension);
  t.context = size("context", kMaxConfigDimension);
  t.positions = kind_of(reader, "positions", kPositionNames);
  t.norm = kind_of(reader, "norm", kNormNames);
  t.mlp = kind_of(reader, "mlp", kMlpNames);
  t.fused_qkv = flag("fused_qkv");
  t.qkv_bias = flag("qkv_bias");
  t.attention_output_bias = flag("attention_output_bias");
  t.mlp_bias = flag("mlp_bias");
  t.qk_norm = flag("qk_norm");
  t.tied_head = flag("tied_head");
  if (reader.optional("experts") != nullptr) {
    t.experts = size("experts", kMaxConfigDimension);
    t.experts_per_token = size("experts_per_token", static_cast<std::int64_t>(t.experts));
    t.expert_width = size("expert_width", kMaxConfigDimension);
    t.renormalize_routing = flag("renormalize_routing");
    if (reader.optional("aux_loss") != nullptr) t.aux_loss = flag("aux_loss");
    if (const nlohmann::json* dense = reader.optional("dense_layers")) {
      if (!dense->is_array()) {
        throw ParseError(reader.field("dense_layers") + " must be a list of layers, not " +
                         detail::json_type_name(*dense));
      }
      for (const nlohmann::json& layer : *dense) {
        if (!layer.is_number_integer() || layer.get<std::int64_t>() < 0 ||
            layer.get<std::int64_t>() >= static_cast<std::int64_t>(t.layers) ||
            (!t.dense_layers.empty() && layer.get<std::size_t>() <= t.dense_layers.back())) {
          throw InvalidArgument(reader.field("dense_layers") + " holds " + layer.dump() +
                                "; expected ascending layers 0 to " + std::to_string(t.layers - 1));
        }
        t.dense_layers.push_back(layer.get<std::size_t>());
      }
    }
    if (t.mlp != MlpKind::kGatedSilu) {
      throw InvalidArgument(
          "transformer.experts: a Mixture of Experts' experts are gated "
          "(transformer.mlp \"gated_silu\")");
    }
  }
  reader.finish();
  if (t.heads % t.kv_heads != 0) {
    throw InvalidArgument("transformer.kv_heads (" + std::to_string(t.kv_heads) +
                          ") must divide transformer.heads (" + std::to_string(t.heads) + ")");
  }
  return t;
}

ModelManifest manifest_of_json(const nlohmann::json& json) {
  detail::JsonObjectReader reader(json, "");
  const nlohmann::json& list = reader.required("parameters");
  const nlohmann::json* units = reader.optional("axis_units");
  const nlohmann::json* transformer = reader.optional("transformer");
  reader.finish();
  if (!list.is_array()) {
    throw ParseError("field 'parameters' must be a list, not " + detail::json_type_name(list));
  }
  if (list.size() > static_cast<std::size_t>(kMaxManifestParameters)) {
    throw InvalidArgument("the manifest lists " + std::to_string(list.size()) +
                          " parameters; at most " + std::to_string(kMaxManifestParameters) +
                          " are read");
  }
  ModelManifest manifest;
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ParameterInfo p = parameter_from_json(list[i], "parameters[" + std::to_string(i) + "]");
    check_parameter(p);
    if (!names.insert(p.name).second) {
      throw InvalidArgument("parameter '" + p.name + "' appears twice in the manifest");
    }
    manifest.parameters.push_back(std::move(p));
  }
  if (units != nullptr) manifest.axis_units = axis_units_from_json(*units);
  if (transformer != nullptr) manifest.transformer = transformer_of_json(*transformer);
  (void)manifest.num_bytes();  // the model's bytes must be countable too
  return manifest;
}

}  // namespace

ModelManifest ModelManifest::from_json(std::string_view text) {
  return manifest_of_json(detail::parse_json(text, "model manifest"));
}

std::string ModelManifest::to_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ParameterInfo& p : parameters) {
    nlohmann::ordered_json entry = {
        {"name", p.name}, {"shape", p.shape}, {"dtype", to_string(p.dtype)}};
    if (p.logical_axes) {
      nlohmann::ordered_json axes = nlohmann::ordered_json::array();
      for (const std::string& axis : *p.logical_axes) {
        axes.push_back(axis.empty() ? nlohmann::ordered_json(nullptr)
                                    : nlohmann::ordered_json(axis));
      }
      entry["logical_axes"] = std::move(axes);
    }
    list.push_back(std::move(entry));
  }
  nlohmann::ordered_json json{{"parameters", std::move(list)}};
  if (!axis_units.empty()) json["axis_units"] = axis_units;
  if (transformer) json["transformer"] = transformer_json(*transformer);
  return json.dump();
}

ModelManifest gpt2_manifest(const Gpt2Config& c) {
  for (const auto& [key, value] : {std::pair{"vocab_size", c.vocab_size},
                                   {"n_positions", c.n_positions},
                                   {"n_embd", c.n_embd},
                                   {"n_layer", c.n_layer},
                                   {"n_head", c.n_head}}) {
    require_positive("GPT-2", key, value);
  }
  require_layers("GPT-2", "n_layer", c.n_layer);
  if (c.n_embd % c.n_head != 0) {
    throw InvalidArgument("GPT-2 config 'n_embd' (" + std::to_string(c.n_embd) +
                          ") is not divisible by 'n_head' (" + std::to_string(c.n_head) + ")");
  }
  const std::int64_t e = c.n_embd;
  const std::int64_t inner = c.n_inner.value_or(checked_multiply(4, e, "GPT-2 4 x n_embd"));
  const std::int64_t qkv = checked_multiply(3, e, "GPT-2 3 x n_embd");
  require_positive("GPT-2", "n_inner", inner);
  ManifestBuilder b(c.dtype);
  b.add("transformer.wte.weight", {c.vocab_size, e});
  b.add("transformer.wpe.weight", {c.n_positions, e});
  for (std::int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    b.add(h + "ln_1.weight", {e});
    b.add(h + "ln_1.bias", {e});
    b.add(h + "attn.c_attn.weight", {e, qkv});
    b.add(h + "attn.c_attn.bias", {qkv});
    b.add(h + "attn.c_proj.weight", {e, e});
    b.add(h + "attn.c_proj.bias", {e});
    b.add(h + "ln_2.weight", {e});
    b.add(h + "ln_2.bias", {e});
    b.add(h + "mlp.c_fc.weight", {e, inner});
    b.add(h + "mlp.c_fc.bias", {inner});
    b.add(h + "mlp.c_proj.weight", {inner, e});
    b.add(h + "mlp.c_proj.bias", {e});
  }
  b.add("transformer.ln_f.weight", {e});
  b.add("transformer.ln_f.bias", {e});
  if (!c.tie_word_embeddings) b.add("lm_head.weight", {c.vocab_size, e});
  ModelManifest manifest = b.take();
  manifest.axis_units = {{"heads", e / c.n_head}};
  return checked_manifest(std::move(manifest), "GPT-2");
}

ModelManifest llama_manifest(const LlamaConfig& c) {
  for (const auto& [key, value] : {std::pair{"vocab_size", c.vocab_size},
                                   {"hidden_size", c.hidden_size},
                                   {"intermediate_size", c.intermediate_size},
                                   {"num_hidden_layers", c.num_hidden_layers},
                                   {"num_attention_heads", c.num_attention_heads}}) {
    require_positive("Llama", key, value);
  }
  require_layers("Llama", "num_hidden_layers", c.num_hidden_layers);
  const std::int64_t heads = c.num_attention_heads;
  const std::int64_t kv_heads = c.num_key_value_heads.value_or(heads);
  require_positive("Llama", "num_key_value_heads", kv_heads);
  if (heads % kv_heads != 0) {
    throw InvalidArgument("Llama config 'num_attention_heads' (" + std::to_string(heads) +
                          ") is not a multiple of 'num_key_value_heads' (" +
                          std::to_string(kv_heads) + ")");
  }
  if (!c.head_dim && c.hidden_size % heads != 0) {
    throw InvalidArgument("Llama config 'hidden_size' (" + std::to_string(c.hidden_size) +
                          ") is not divisible by 'num_attention_heads' (" + std::to_string(heads) +
                          ") and no 'head_dim' is given");
  }
  const std::int64_t head_dim = c.head_dim.value_or(c.hidden_size / heads);
  require_positive("Llama", "head_dim", head_dim);
  const std::int64_t h = c.hidden_size;
  const std::int64_t q = checked_multiply(heads, head_dim, "Llama num_attention_heads x head_dim");
  const std::int64_t kv =
      checked_multiply(kv_heads, head_dim, "Llama num_key_value_heads x head_dim");
  const std::int64_t ff = c.intermediate_size;
  const bool qkv_bias = c.attention_bias || c.qkv_bias;
  ManifestBuilder b(c.dtype);
  b.add("model.embed_tokens.weight", {c.vocab_size, h});
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    b.add(l + "self_attn.q_proj.weight", {q, h});
    if (qkv_bias) b.add(l + "self_attn.q_proj.bias", {q});
    b.add(l + "self_attn.k_proj.weight", {kv, h});
    if (qkv_bias) b.add(l + "self_attn.k_proj.bias", {kv});
    b.add(l + "self_attn.v_proj.weight", {kv, h});
    if (qkv_bias) b.add(l + "self_attn.v_proj.bias", {kv});
    b.add(l + "self_attn.o_proj.weight", {h, q});
    if (c.attention_bias) b.add(l + "self_attn.o_proj.bias", {h});
    b.add(l + "mlp.gate_proj.weight", {ff, h});
    if (c.mlp_bias) b.add(l + "mlp.gate_proj.bias", {ff});
    b.add(l + "mlp.up_proj.weight", {ff, h});
    if (c.mlp_bias) b.add(l + "mlp.up_proj.bias", {ff});
    b.add(l + "mlp.down_proj.weight", {h, ff});
    if (c.mlp_bias) b.add(l + "mlp.down_proj.bias", {h});
    b.add(l + "input_layernorm.weight", {h});
    b.add(l + "post_attention_layernorm.weight", {h});
  }
  b.add("model.norm.weight", {h});
  if (!c.tie_word_embeddings) b.add("lm_head.weight", {c.vocab_size, h});
  ModelManifest manifest = b.take();
  manifest.axis_units = {{"heads", head_dim}, {"kv_heads", head_dim}};
  return checked_manifest(std::move(manifest), "Llama");
}

namespace {

// The sizes of a Llama-family config.json ("llama", "mistral" or "qwen2"), with the defaults of
// transformers' class for that type where a size is left out.
LlamaConfig llama_config_of(const nlohmann::json& json, const std::string& type) {
  const auto size = [&](const char* key) {
    return bounded(required_integer(json, key, type), key, type);
  };
  LlamaConfig c;
  c.vocab_size = size("vocab_size");
  c.hidden_size = size("hidden_size");
  c.intermediate_size = size("intermediate_size");
  c.num_hidden_layers = required_integer(json, "num_hidden_layers", type);
  c.num_attention_heads = size("num_attention_heads");
  if (json.contains("num_key_value_heads") && !json["num_key_value_heads"].is_null()) {
    c.num_key_value_heads =
        bounded(detail::json_integer(json["num_key_value_heads"], "num_key_value_heads"),
                "num_key_value_heads", type);
  } else if (type == "mistral") {
    c.num_key_value_heads = 8;  // MistralConfig's default
  }
  if (json.contains("head_dim") && !json["head_dim"].is_null()) {
    c.head_dim = bounded(detail::json_integer(json["head_dim"], "head_dim"), "head_dim", type);
  }
  // Rotary embeddings rotate pairs of a head's dimensions; the query heads' width is bounded as
  // a size is.
  if (c.num_attention_heads > 0 && (c.head_dim || c.hidden_size % c.num_attention_heads == 0)) {
    const std::int64_t head = c.head_dim.value_or(c.hidden_size / c.num_attention_heads);
    if (head % 2 != 0) {
      throw InvalidArgument(type + " config's head_dim is " + std::to_string(head) +
                            "; rotary embeddings rotate pairs, so it must be even");
    }
    if (head > 0) {
      (void)bounded(c.num_attention_heads * head, "num_attention_heads x head_dim", type);
    }
  }
  const std::int64_t context = bounded(optional_integer(json, "max_position_embeddings", 2048),
                                       "max_position_embeddings", type);
  require_positive(type, "max_position_embeddings", context);
  c.tie_word_embeddings = optional_bool(json, "tie_word_embeddings", false);
  c.attention_bias = optional_bool(json, "attention_bias", false);
  c.qkv_bias = type == "qwen2";
  c.mlp_bias = optional_bool(json, "mlp_bias", false);
  c.dtype = config_dtype(json);
  return c;
}

ModelManifest manifest_of_hf_config(const nlohmann::json& json) {
  if (!json.is_object()) {
    throw ParseError("config.json must be a JSON object, not " + detail::json_type_name(json));
  }
  std::string type = json.contains("model_type")
                         ? detail::json_string(json["model_type"], "model_type")
                         : std::string();
  if (type.empty()) {
    if (json.contains("n_embd")) type = "gpt2";
    if (json.contains("hidden_size")) type = "llama";
  }
  if (type == "gpt2") {
    Gpt2Config c;
    c.vocab_size = bounded(required_integer(json, "vocab_size", "GPT-2"), "vocab_size", "GPT-2");
    c.n_positions =
        bounded(optional_integer(json, "n_positions", c.n_positions), "n_positions", "GPT-2");
    c.n_embd = bounded(required_integer(json, "n_embd", "GPT-2"), "n_embd", "GPT-2");
    c.n_layer = required_integer(json, "n_layer", "GPT-2");
    c.n_head = bounded(required_integer(json, "n_head", "GPT-2"), "n_head", "GPT-2");
    if (json.contains("n_inner") && !json["n_inner"].is_null()) {
      c.n_inner = bounded(detail::json_integer(json["n_inner"], "n_inner"), "n_inner", "GPT-2");
    }
    require_positive("GPT-2", "n_positions", c.n_positions);
    c.tie_word_embeddings = optional_bool(json, "tie_word_embeddings", true);
    c.dtype = config_dtype(json);
    return gpt2_manifest(c);
  }
  if (type == "llama" || type == "mistral" || type == "qwen2") {
    return llama_manifest(llama_config_of(json, type));
  }
  if (type.empty()) {
    throw ParseError(
        "config.json has no 'model_type' and neither 'n_embd' (GPT-2) nor "
        "'hidden_size' (Llama)");
  }
  throw ParseError("config.json model_type '" + type +
                   "' is not supported; expected gpt2, llama, mistral or qwen2");
}

}  // namespace

ModelManifest manifest_from_hf_config(std::string_view text) {
  return manifest_of_hf_config(detail::parse_json(text, "config.json"));
}

ModelManifest detail::model_description_of(const nlohmann::json& json) {
  if (json.is_object() && json.contains("parameters")) return manifest_of_json(json);
  return manifest_of_hf_config(json);
}

ModelManifest load_model_description(std::string_view text) {
  return detail::model_description_of(detail::parse_json(text, "model description"));
}

}  // namespace shardwise

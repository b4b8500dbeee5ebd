// The Llama family's configuration: presets, bounds, and its JSON in Hugging Face's names both
// ways (the trainer's model file and transformers' config.json are one format).
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "../detail/json_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {
namespace {

// Bounds that keep every size product far from overflow (docs/reliability.md).
constexpr std::size_t kMaxDimension = std::size_t{1} << 20;
constexpr std::size_t kMaxLayers = 10000;

LlamaConfig tiny() {
  LlamaConfig c;  // the defaults: 4 layers of 128, 4 heads of 32 sharing 2 key/value heads
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

// Fields of a config.json that describe nothing the model computes: names, token ids,
// training-time settings (the dropouts: shardwise trains without dropout), generation defaults.
const std::set<std::string>& ignored_fields() {
  static const std::set<std::string> fields{"architectures",
                                            "transformers_version",
                                            "torch_dtype",
                                            "dtype",
                                            "_name_or_path",
                                            "bos_token_id",
                                            "eos_token_id",
                                            "pad_token_id",
                                            "initializer_range",
                                            "use_cache",
                                            "attention_dropout",
                                            "tokenizer_class",
                                            "output_attentions",
                                            "output_hidden_states",
                                            "return_dict",
                                            "id2label",
                                            "label2id",
                                            "problem_type",
                                            "max_length",
                                            "do_sample",
                                            "temperature",
                                            "top_p",
                                            "top_k",
                                            "num_beams",
                                            "tie_encoder_decoder",
                                            "torchscript",
                                            "chunk_size_feed_forward",
                                            "use_bfloat16",
                                            "pretraining_tp",
                                            "family",
                                            "model_type"};
  return fields;
}

const std::set<std::string>& known_fields() {
  static const std::set<std::string> fields{
      "vocab_size",          "hidden_size",         "intermediate_size", "num_hidden_layers",
      "num_attention_heads", "num_key_value_heads", "head_dim",          "max_position_embeddings",
      "rope_theta",          "rope_scaling",        "rope_parameters",   "rms_norm_eps",
      "tie_word_embeddings", "hidden_act",          "attention_bias",    "mlp_bias",
      "sliding_window",      "use_sliding_window"};
  return fields;
}

class Reader {
 public:
  Reader(const nlohmann::json& json, const std::string& what) : json_(json), what_(what) {}

  [[noreturn]] void refuse(const std::string& key, const nlohmann::json& value,
                           const std::string& why) const {
    throw InvalidArgument(what_ + ": \"" + key + "\" is " + echo_input(value.dump(), 60) + "; " +
                          why);
  }
  [[nodiscard]] const nlohmann::json* find(const std::string& key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  std::size_t size(const std::string& key, std::size_t most,
                   std::optional<std::size_t> fallback = std::nullopt) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      throw InvalidArgument(what_ + ": \"" + key + "\" is missing");
    }
    if (!v->is_number_integer() || v->get<std::int64_t>() < 1 ||
        v->get<std::int64_t>() > static_cast<std::int64_t>(most)) {
      refuse(key, *v, "expected an integer from 1 to " + std::to_string(most));
    }
    return v->get<std::size_t>();
  }
  double positive(const nlohmann::json& object, const std::string& key, double fallback,
                  bool required = false) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      if (required) throw InvalidArgument(what_ + ": \"" + key + "\" is missing");
      return fallback;
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0) {
      refuse(key, *it, "expected a finite positive number");
    }
    return it->get<double>();
  }
  bool flag(const std::string& key, bool fallback) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) refuse(key, *v, "expected true or false");
    return v->get<bool>();
  }
  [[nodiscard]] const nlohmann::json& json() const { return json_; }

 private:
  const nlohmann::json& json_;
  const std::string& what_;
};

// rope_scaling / rope_parameters: "default" (or none) or "llama3", with only that type's keys;
// a rope_theta in it must agree with the top level's where both are given.
void read_rope(const Reader& r, const nlohmann::json& rope, const std::string& key,
               LlamaConfig& c) {
  if (!rope.is_object()) r.refuse(key, rope, "expected an object or null");
  std::string type = "default";
  for (const char* name : {"rope_type", "type"}) {
    if (!rope.contains(name)) continue;
    if (!rope[name].is_string())
      r.refuse(key, rope, std::string("its \"") + name + "\" is no name");
    type = rope[name].get<std::string>();
  }
  if (type != "default" && type != "llama3") {
    r.refuse(key, rope,
             "shardwise's Llama computes rotary embeddings unscaled or with type \"llama3\"");
  }
  static const std::set<std::string> common{"rope_type", "type", "rope_theta"};
  static const std::set<std::string> llama3{"factor", "low_freq_factor", "high_freq_factor",
                                            "original_max_position_embeddings"};
  for (const auto& item : rope.items()) {
    if (common.count(item.key()) == 0 && (type != "llama3" || llama3.count(item.key()) == 0)) {
      r.refuse(key, rope,
               "its \"" + echo_input(item.key(), 40) + "\" is not a field of type " + type);
    }
  }
  if (rope.contains("rope_theta")) {
    const double theta = r.positive(rope, "rope_theta", c.rope_theta);
    if (r.find("rope_theta") != nullptr && theta != c.rope_theta) {
      r.refuse(key, rope,
               "its rope_theta disagrees with the top level's " + std::to_string(c.rope_theta));
    }
    c.rope_theta = theta;
  }
  if (type == "default") return;
  c.rope_scaling.factor = r.positive(rope, "factor", 0, true);
  c.rope_scaling.low_freq_factor = r.positive(rope, "low_freq_factor", 0, true);
  c.rope_scaling.high_freq_factor = r.positive(rope, "high_freq_factor", 0, true);
  c.rope_scaling.original_context = r.positive(rope, "original_max_position_embeddings", 0, true);
  if (c.rope_scaling.high_freq_factor <= c.rope_scaling.low_freq_factor) {
    r.refuse(key, rope, "high_freq_factor must exceed low_freq_factor");
  }
}

}  // namespace

bool operator==(const LlamaConfig& a, const LlamaConfig& b) {
  return a.n_layer == b.n_layer && a.hidden_size == b.hidden_size && a.n_head == b.n_head &&
         a.n_kv_head == b.n_kv_head && a.head_dim == b.head_dim &&
         a.intermediate_size == b.intermediate_size && a.context_length == b.context_length &&
         a.vocab_size == b.vocab_size && a.rope_theta == b.rope_theta &&
         a.rope_scaling.factor == b.rope_scaling.factor &&
         a.rope_scaling.low_freq_factor == b.rope_scaling.low_freq_factor &&
         a.rope_scaling.high_freq_factor == b.rope_scaling.high_freq_factor &&
         a.rope_scaling.original_context == b.rope_scaling.original_context &&
         a.rms_norm_eps == b.rms_norm_eps && a.tie_word_embeddings == b.tie_word_embeddings;
}

const std::vector<std::string>& llama_preset_names() {
  static const std::vector<std::string> names{"llama-tiny", "smollm2-135m"};
  return names;
}

LlamaConfig llama_preset(const std::string& name, const std::string& field) {
  if (name == "llama-tiny") return tiny();
  if (name == "smollm2-135m") return smollm2_135m();
  throw InvalidArgument(field + ": '" + echo_input(name) +
                        "' is not a Llama preset (llama-tiny, smollm2-135m)");
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
  if (with_family) {
    json["family"] = "llama";
  } else {
    json["model_type"] = "llama";
    json["architectures"] = {"LlamaForCausalLM"};
    json["hidden_act"] = "silu";
    json["attention_bias"] = false;
    json["mlp_bias"] = false;
    json["attention_dropout"] = 0.0;
    json["initializer_range"] = 0.02;
    json["torch_dtype"] = "float32";
  }
  return json.dump(2) + "\n";
}

bool is_llama_config(std::string_view text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object()) return false;
  const auto it = json.find("family");
  return it != json.end() && it->is_string() && it->get<std::string>() == "llama";
}

LlamaConfig llama_config_from_json(std::string_view text, const std::string& what) {
  const nlohmann::json json = shardwise::detail::parse_json(text, what);
  if (!json.is_object()) throw InvalidArgument(what + " is not a JSON object");
  const Reader r(json, what);
  for (const auto& item : json.items()) {
    if (ignored_fields().count(item.key()) == 0 && known_fields().count(item.key()) == 0) {
      throw InvalidArgument(what + ": \"" + echo_input(item.key(), 60) +
                            "\" is a field shardwise's Llama does not implement (a model that "
                            "sets it may compute otherwise)");
    }
  }
  for (const char* key : {"family", "model_type"}) {
    if (const nlohmann::json* v = r.find(key); v != nullptr && *v != "llama") {
      r.refuse(key, *v, "expected \"llama\"");
    }
  }
  LlamaConfig c;
  c.vocab_size = r.size("vocab_size", kMaxDimension);
  c.hidden_size = r.size("hidden_size", kMaxDimension);
  c.intermediate_size = r.size("intermediate_size", kMaxDimension);
  c.n_layer = r.size("num_hidden_layers", kMaxLayers);
  c.n_head = r.size("num_attention_heads", kMaxDimension);
  c.n_kv_head = r.size("num_key_value_heads", kMaxDimension, c.n_head);
  if (r.find("head_dim") == nullptr && c.hidden_size % c.n_head != 0) {
    throw InvalidArgument(what + ": \"hidden_size\" " + std::to_string(c.hidden_size) +
                          " is not divisible by \"num_attention_heads\" " +
                          std::to_string(c.n_head) + " and no \"head_dim\" is given");
  }
  c.head_dim = r.size("head_dim", kMaxDimension, c.hidden_size / c.n_head);
  c.context_length = r.size("max_position_embeddings", kMaxDimension, 2048);
  c.rope_theta = r.positive(json, "rope_theta", 10000);
  c.rms_norm_eps = r.positive(json, "rms_norm_eps", 1e-6);
  c.tie_word_embeddings = r.flag("tie_word_embeddings", false);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (const nlohmann::json* v = r.find(key)) read_rope(r, *v, key, c);
  }
  if (const nlohmann::json* v = r.find("hidden_act"); v != nullptr && *v != "silu") {
    r.refuse("hidden_act", *v, "shardwise's Llama computes SwiGLU with silu");
  }
  for (const char* key : {"attention_bias", "mlp_bias", "use_sliding_window"}) {
    if (r.flag(key, false)) {
      r.refuse(key, json[key], "shardwise's Llama has no such biases or windows");
    }
  }
  if (const nlohmann::json* v = r.find("sliding_window")) {
    r.refuse("sliding_window", *v, "shardwise's Llama attends to the whole causal context");
  }
  try {
    validate(c);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(what + ": " + e.what());
  }
  return c;
}

}  // namespace shardwise::models

#pragma once
// Model manifests: the parameters of a model (name, shape, dtype, optional logical axes), read
// from a JSON manifest or generated from a Hugging Face-style config.json of a GPT-2 or
// Llama-family model, with exact parameter counts.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/strategy/logical_axes.hpp"
#include "shardwise/strategy/spec_resolution.hpp"
#include "shardwise/strategy/transformer_shape.hpp"

namespace shardwise {

// Bounds on what a model description may hold: the deepest published models have about 10^2
// layers and 10^3 tensors per layer at most, so larger counts are typos or hostile input,
// refused before memory is spent on them.
inline constexpr std::int64_t kMaxModelLayers = 10000;
// The largest size a config.json's dimension may have (vocabulary, width, heads, context): the
// largest published models stay below 2^18, and every product of two stays far from overflow.
inline constexpr std::int64_t kMaxConfigDimension = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxManifestParameters = 1000000;

struct ParameterInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
  // When absent, parameter-name rules supply them.
  std::optional<LogicalAxes> logical_axes = std::nullopt;
  friend bool operator==(const ParameterInfo&, const ParameterInfo&) = default;
};

struct ModelManifest {
  std::vector<ParameterInfo> parameters;
  // Elements per indivisible unit of logical axes: the generators set "heads" and "kv_heads"
  // to the head dimension, so tensor parallelism never splits inside an attention head.
  AxisUnits axis_units;
  // What the transformer is, where a model family states it (its parts: the planner sizes the
  // trainer's activations from it) or a manifest file carries it; absent otherwise, and the
  // planner reads the model by its parameters' names and shapes.
  std::optional<TransformerShape> transformer;

  [[nodiscard]] std::int64_t num_parameters() const;
  [[nodiscard]] std::int64_t num_bytes() const;

  // {"parameters": [{"name": "...", "shape": [...], "dtype": "bf16", "logical_axes": [...]}],
  //  "axis_units": {"heads": 64}, "transformer": {"layers": 12, ...}} ("logical_axes" optional,
  // null for an unnamed dimension; "axis_units" and "transformer" optional, the latter with
  // every field of TransformerShape, the kinds by name: "learned"/"rotary",
  // "layernorm"/"rmsnorm", "gelu"/"gated_silu"). Unknown keys, duplicate names, negative sizes,
  // logical axes of the wrong length, units below 1 and a shape no family could state are
  // errors naming the parameter, axis or field.
  static ModelManifest from_json(std::string_view text);
  [[nodiscard]] std::string to_json() const;

  friend bool operator==(const ModelManifest&, const ModelManifest&) = default;
};

// GPT-2 (GPT2LMHeadModel parameter names; Conv1D weights are (in, out)).
struct Gpt2Config {
  std::int64_t vocab_size = 50257;
  std::int64_t n_positions = 1024;
  std::int64_t n_embd = 768;
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::optional<std::int64_t> n_inner = std::nullopt;  // default 4 * n_embd
  bool tie_word_embeddings = true;
  DType dtype = DType::kF32;
};
ModelManifest gpt2_manifest(const Gpt2Config& config);

// Llama, Mistral and Qwen2 (LlamaForCausalLM parameter names; nn.Linear weights are (out, in)).
struct LlamaConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 11008;
  std::int64_t num_hidden_layers = 32;
  std::int64_t num_attention_heads = 32;
  std::optional<std::int64_t> num_key_value_heads = std::nullopt;  // default: attention heads
  std::optional<std::int64_t> head_dim = std::nullopt;             // default hidden_size / heads
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q, k, v and o biases
  bool qkv_bias = false;        // q, k, v biases only (Qwen2)
  bool mlp_bias = false;
  DType dtype = DType::kF32;
};
ModelManifest llama_manifest(const LlamaConfig& config);

// A config.json: "model_type" gpt2 / llama / mistral / qwen2 (or, without it, GPT-2 keys such
// as n_embd or Llama keys such as hidden_size), with the defaults of transformers' class for
// that type. "dtype" (transformers 5) or "torch_dtype" sets the dtype. Other keys of such
// configs are ignored: the planner counts what a model holds, also where the trainer does not
// compute what a key asks (biases, sliding windows). Missing required keys and bad values are
// errors naming the key: sizes that are no integers, below 1, above kMaxConfigDimension (layers
// above kMaxModelLayers), that do not divide, or an odd rotary head, as the models' readers
// refuse them (tests/models/hf_config_agreement_test.cpp holds both to it).
ModelManifest manifest_from_hf_config(std::string_view text);

// A manifest (a JSON object with "parameters") or a config.json.
ModelManifest load_model_description(std::string_view text);

}  // namespace shardwise

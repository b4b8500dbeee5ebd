#pragma once
// A Llama-style decoder as transformers' LlamaForCausalLM computes it: a token embedding (no
// position embedding), pre-norm blocks (RMSNorm; grouped-query attention with rotary position
// embeddings in Hugging Face's rotate_half layout, no biases; the SwiGLU MLP gate, up, down),
// a final RMSNorm and a head tied to the embedding or its own; fp32 on the CPU. Its parameters
// carry transformers' names and (out, in) layouts, so Hugging Face files map one to one.
//
// Tensor parallelism (Megatron-LM's split, `model` axis of degree t): query heads, the MLP's
// width and the vocabulary split over t; key/value heads split where t divides their count, and
// where their count divides t each key/value projection is held whole by every model rank, each
// computing with the head its query heads read (t / kv ranks per head, vLLM's rule) and the
// projection's gradient summed over the axis. Any other degree is refused naming the sizes.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/partition_spec.hpp"
#include "shardwise/kernels/rotary.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/transformer_spec.hpp"

namespace shardwise::models {

// The architectures that are a Llama with one part changed, each its own family: Qwen2 (biases
// on q, k and v), Qwen3 (an RMSNorm over each head's queries and keys), and the Mixtures of
// Experts Mixtral (a Mistral whose MLPs are routed experts) and Qwen3-MoE (a Qwen3 so).
enum class LlamaVariant { kLlama, kQwen2, kQwen3, kMixtral, kQwen3Moe };
// "llama", "qwen2", "qwen3", "mixtral", "qwen3_moe": the family's name and the Hugging Face
// model_type.
[[nodiscard]] std::string to_string(LlamaVariant variant);
// Whether the variant's MLPs are Mixtures of Experts.
[[nodiscard]] bool has_experts(LlamaVariant variant);
// "Llama", "Qwen2", "Qwen3", "Mixtral", "Qwen3-MoE": the architecture's name for messages.
[[nodiscard]] std::string display_name(LlamaVariant variant);

struct LlamaConfig {
  LlamaVariant variant = LlamaVariant::kLlama;
  std::size_t n_layer = 4;
  std::size_t hidden_size = 128;
  std::size_t n_head = 4;
  std::size_t n_kv_head = 2;
  std::size_t head_dim = 32;
  std::size_t intermediate_size = 352;
  std::size_t context_length = 64;  // max_position_embeddings
  std::size_t vocab_size = 256;
  double rope_theta = 10000;
  kernels::RotaryScaling rope_scaling;  // factor 0: none
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  // Biases on q, k, v and o (LlamaConfig's and Qwen3Config's attention_bias); Qwen2 has them on
  // q, k and v always, and none on o.
  bool attention_bias = false;
  // A Mixture of Experts (Mixtral, Qwen3-MoE): each layer's MLP is `experts` gated-SiLU experts
  // of inner width `expert_width` (Mixtral's intermediate_size, Qwen3-MoE's
  // moe_intermediate_size), each token routed to `experts_per_token` of them, their weights
  // renormalised over the chosen where `renormalize_routing` (Mixtral always, Qwen3-MoE's
  // norm_topk_prob). Zero experts elsewhere.
  std::size_t experts = 0;
  std::size_t experts_per_token = 0;
  std::size_t expert_width = 0;
  bool renormalize_routing = false;
  // Qwen3-MoE's dense layers among the routed ones, as transformers reads them: layer l routes
  // where (l + 1) is a multiple of `sparse_step` (decoder_sparse_step) and l is not among
  // `mlp_only_layers`; the others are dense gated-SiLU MLPs of intermediate_size.
  std::size_t sparse_step = 1;
  std::vector<std::int64_t> mlp_only_layers;
  // Those dense layers, ascending (TransformerShape::dense_layers).
  [[nodiscard]] std::vector<std::size_t> dense_layers() const;
  // The Switch/Mixtral auxiliary load-balancing loss: added to the trained loss, weighted by
  // router_aux_loss_coef, where output_router_logits asks for it (transformers adds it then).
  double router_aux_loss_coef = 0.001;
  bool output_router_logits = false;
  // Its weight in the trained loss: the coefficient where it is added, else 0.
  [[nodiscard]] double aux_loss_weight() const {
    return output_router_logits ? router_aux_loss_coef : 0.0;
  }

  friend bool operator==(const LlamaConfig& a, const LlamaConfig& b);
};

// "llama-tiny" (trains in seconds on a CPU), "smollm2-135m", "qwen2-tiny", "qwen3-tiny",
// "mixtral-tiny" or "qwen3-moe-tiny"; InvalidArgument naming `field`.
[[nodiscard]] LlamaConfig llama_preset(const std::string& name, const std::string& field);
[[nodiscard]] const std::vector<std::string>& llama_preset_names();
// The presets of one variant's family.
[[nodiscard]] std::vector<std::string> llama_preset_names(LlamaVariant variant);
// Sizes positive and bounded, head_dim even, n_head a multiple of n_kv_head, theta, epsilon and
// the scaling finite and positive; InvalidArgument naming the field and the value.
void validate(const LlamaConfig& config);

// The configuration in Hugging Face's LlamaConfig names (with "family": "llama"): the trainer's
// model file, checkpoint metadata's "model", and, without "family", a config.json.
[[nodiscard]] std::string llama_config_json(const LlamaConfig& config, bool with_family = true);
// A Llama config in those names: transformers' config.json of a Llama or a Mistral
// ("model_type" "llama" or "mistral", as transformers 4 and 5 write them), or the trainer's file
// ("family": "llama"). The rule (docs/huggingface.md): a field that changes what the model
// computes is computed (sizes, rope_theta, rope_scaling or rope_parameters of type "default" or
// "llama3", rms_norm_eps, tied embeddings) or refused naming it and its value (biases, another
// hidden_act, a sliding window shorter than the context, partial or interleaved rotation, another
// rope type, quantization); names, ids, version stamps, metadata (every key starting with "_"),
// generation settings and fields at the value the computation assumes are taken. A field the
// reader has never seen is taken, and `notes` gets one line naming it (in the trainer's own
// file, where it would be a typo, it is refused). Missing, zero, negative, huge or inconsistent
// sizes are refused too: InvalidArgument starting with `what`.
[[nodiscard]] LlamaConfig llama_config_from_json(std::string_view text, const std::string& what,
                                                 std::vector<std::string>& notes);
// The same, for callers that show no notes (the trainer's own files, which have none).
[[nodiscard]] LlamaConfig llama_config_from_json(std::string_view text, const std::string& what);
// Whether a configuration is the trainer's file of `variant` ("family": "llama", "qwen2", ...).
[[nodiscard]] bool is_llama_config(std::string_view text, LlamaVariant variant);
// Whether a configuration is the trainer's Llama file ("family": "llama"). A config.json
// ("model_type": "llama") is read through the family's Hugging Face adapter.
[[nodiscard]] bool is_llama_config(std::string_view text);

// The parameters in transformers' names and order: model.embed_tokens, per layer
// input_layernorm, q/k/v/o_proj, post_attention_layernorm, gate/up/down_proj, then model.norm
// and (untied) lm_head; normal(0, 0.02) weights, norms one; weight decay on matrices and the
// embedding only.
[[nodiscard]] std::vector<train::ParameterSpec> llama_parameters(const LlamaConfig& config);
// The split over the model axis the layers compute with (see above); P() everywhere at degree 1.
[[nodiscard]] std::vector<PartitionSpec> llama_model_placements(const LlamaConfig& config,
                                                                int degree);
// Whether degree t holds each key/value head on t / n_kv_head ranks (their count divides t).
[[nodiscard]] bool replicates_kv_heads(const LlamaConfig& config, int degree);
// The key/value projections' rows each model rank holds where the heads are replicated: one
// head's, on t / n_kv_head ranks (train::SharedRows); none otherwise.
[[nodiscard]] std::vector<train::SharedRows> llama_shared_rows(const LlamaConfig& config,
                                                               int degree);

// The Llama as the training layer's transformer assembles it: rotary positions with the
// config's theta and scaling, RMSNorms, separate q, k and v without biases over grouped-query
// heads, the gated SiLU MLP, the head tied or not.
[[nodiscard]] train::TransformerSpec llama_transformer(const LlamaConfig& config);

class LlamaDefinition final : public train::ModelDefinition {
 public:
  explicit LlamaDefinition(const LlamaConfig& config);

  [[nodiscard]] const LlamaConfig& config() const { return config_; }
  [[nodiscard]] std::string family() const override { return to_string(config_.variant); }
  [[nodiscard]] std::string config_json() const override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string describe_config(const std::string& config_json) const override;
  [[nodiscard]] std::size_t vocab_size() const override { return config_.vocab_size; }
  [[nodiscard]] std::size_t context_length() const override { return config_.context_length; }
  [[nodiscard]] std::size_t layers() const override { return config_.n_layer; }
  [[nodiscard]] std::vector<train::ParameterSpec> parameters() const override;
  [[nodiscard]] std::vector<std::int64_t> parameter_layers() const override;
  [[nodiscard]] std::vector<std::string> chunk_parameters(
      const train::LayerRange& range) const override;
  [[nodiscard]] std::vector<PartitionSpec> model_placements(int degree) const override;
  void check_stages(std::int64_t stages, const std::string& field) const override;
  [[nodiscard]] std::vector<train::SharedRows> shared_rows(int degree) const override;
  [[nodiscard]] ModelManifest manifest() const override;
  // Per layer 2 C (q + 2 kv + o) + 6 C F (the MLP) + 4 seq H hd (attention); the head 2 V C.
  [[nodiscard]] std::vector<double> layer_flops(std::size_t seq) const override;
  [[nodiscard]] double head_flops() const override;
  [[nodiscard]] std::unique_ptr<train::ModelChunk> build_chunk(
      train::ParameterStore& store, const train::ChunkOptions& options) const override;
  [[nodiscard]] bool decodes() const override { return true; }
  [[nodiscard]] std::unique_ptr<train::Decoder> build_decoder(
      train::ParameterStore& store, const train::TensorParallel& tensor_parallel,
      std::size_t capacity, Precision precision) const override;

 private:
  LlamaConfig config_;
};

}  // namespace shardwise::models

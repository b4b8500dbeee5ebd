#pragma once
// shardwise's Llama as transformers' LlamaForCausalLM stores it (and its Qwen2 and Qwen3 as
// Qwen2ForCausalLM and Qwen3ForCausalLM do): the same names and (out, in) layouts, so every
// tensor maps one to one; config.json both ways through llama.hpp's reader.

#include "shardwise/models/hf_adapter.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {

class HfLlamaAdapter final : public HfAdapter {
 public:
  explicit HfLlamaAdapter(LlamaVariant variant = LlamaVariant::kLlama) : variant_(variant) {}
  // "hf-llama", "hf-qwen2", "hf-qwen3".
  [[nodiscard]] std::string format() const override { return "hf-" + to_string(variant_); }
  [[nodiscard]] std::string words() const override;
  // A Mistral is a Llama whose attention may be limited to a window: read where the window
  // spans the context (and exported as a Llama, which computes the same).
  [[nodiscard]] std::vector<std::string> model_types() const override;
  using HfAdapter::model_from_hf_config;
  [[nodiscard]] std::shared_ptr<const train::ModelDefinition> model_from_hf_config(
      const std::string& text, const std::string& what,
      std::vector<std::string>& notes) const override;
  [[nodiscard]] std::string hf_config_json(const train::ModelDefinition& model) const override;
  [[nodiscard]] Shape hf_shape(const std::string& /*name*/, const Shape& shape) const override {
    return shape;
  }
  [[nodiscard]] std::vector<float> to_hf(const std::string& /*name*/, const Shape& /*shape*/,
                                         const std::vector<float>& values) const override {
    return values;
  }
  void read_block(const ckpt::CheckpointReader& file, const std::string& hf_name,
                  const std::string& name, const Shape& shape, const ShardIndex& box,
                  float* out) const override;
  void check_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                    const std::string& name, const Shape& shape) const override;
  [[nodiscard]] std::string hf_name_of(const ckpt::CheckpointIndex& file,
                                       const std::string& name) const override;
  // A Mixture of Experts' stacked experts as published files and transformers' save_pretrained
  // keep them: each expert's gate, up and down its own tensor (Mixtral's
  // block_sparse_moe.experts.N.w1, w3, w2 and its router block_sparse_moe.gate; Qwen3-MoE's
  // mlp.experts.N.gate_proj, up_proj, down_proj). A file holding the stacked tensors under
  // transformers 5's own names (mlp.experts.gate_up_proj) is read as it is. Exports write the
  // published names, which transformers 5 loads.
  [[nodiscard]] std::vector<HfPiece> hf_pieces(const ckpt::CheckpointIndex& file,
                                               const std::string& name,
                                               const Shape& shape) const override;
  [[nodiscard]] std::vector<HfPiece> hf_export_pieces(const std::string& name,
                                                      const Shape& shape) const override;
  // Rotary frequencies some files keep as buffers (transformers recomputes them).
  [[nodiscard]] bool ignored_tensor(const std::string& hf_name) const override;
  // A tied model's file may carry the head as a copy of the embedding.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> tied_tensors() const override {
    return {{"lm_head.weight", "model.embed_tokens.weight"}};
  }

 private:
  LlamaVariant variant_;
};

}  // namespace shardwise::models

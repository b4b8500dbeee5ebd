#pragma once
// shardwise's GPT parameters as Hugging Face's GPT-2 stores them (transformers'
// GPT2LMHeadModel): the same names, but its Conv1D weights are (in, out), the transpose of the
// trainer's (out, in), and attention's Q, K and V sit side by side in one (C, 3C) matrix where
// the trainer stacks them as (3, C, C). A square weight (attn.c_proj) loaded without its
// transpose would pass every shape check: the mapping is one function each way, tested by values.

#include <filesystem>
#include <string>
#include <vector>

#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/hf_adapter.hpp"

namespace shardwise::models {

// The shape Hugging Face gives parameter `name` of shardwise shape `shape`.
[[nodiscard]] Shape hf_gpt2_shape(const std::string& name, const Shape& shape);

// A whole parameter's values in Hugging Face's layout.
[[nodiscard]] std::vector<float> to_hf_gpt2(const std::string& name, const Shape& shape,
                                            const std::vector<float>& values);

// Reads the trainer's block `box` of parameter `name` (shape `shape`) from a Hugging Face
// GPT-2 file into `out` (the box's elements, row-major), reading only the rows and columns the
// box needs; `hf_name` is the tensor's name in the file. F32, F64, F16 and BF16 files are read.
void read_hf_gpt2_block(const ckpt::CheckpointReader& file, const std::string& hf_name,
                        const std::string& name, const Shape& shape, const ShardIndex& box,
                        float* out);

// CheckpointError naming the tensor where the file lacks `hf_name`, or holds it in another shape
// than GPT-2's layout of parameter `name` (shape `shape`), or of a dtype that is not read.
void check_hf_gpt2_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                          const std::string& name, const Shape& shape);

// config.json for transformers' GPT2LMHeadModel of `gpt` (GELU with tanh, LayerNorm eps 1e-5,
// tied embeddings, no dropout), as shardwise's GPT computes.
[[nodiscard]] std::string hf_gpt2_config_json(const GptConfig& gpt);

// The GPT of a Hugging Face config.json; InvalidArgument naming the field and its value where it
// is not a GPT-2 shardwise computes alike (another activation or LayerNorm epsilon, attention
// scaled otherwise, an inner width other than 4 x n_embd, untied embeddings, no n_head). Names,
// ids, versions, dropouts and generation settings are taken; a field the reader has never seen
// is taken, and `notes` gets one line naming it (docs/huggingface.md).
[[nodiscard]] GptConfig gpt_from_hf_config(const std::string& text, const std::string& what,
                                           std::vector<std::string>& notes);
// The same, for callers that show no notes.
[[nodiscard]] GptConfig gpt_from_hf_config(const std::string& text, const std::string& what);

}  // namespace shardwise::models

namespace shardwise::models {

// The GPT's Hugging Face adapter, on the functions above.
class HfGpt2Adapter final : public HfAdapter {
 public:
  [[nodiscard]] std::string format() const override { return "hf-gpt2"; }
  [[nodiscard]] std::string words() const override { return "Hugging Face GPT-2"; }
  [[nodiscard]] std::vector<std::string> model_types() const override { return {"gpt2"}; }
  using HfAdapter::model_from_hf_config;
  [[nodiscard]] std::shared_ptr<const train::ModelDefinition> model_from_hf_config(
      const std::string& text, const std::string& what,
      std::vector<std::string>& notes) const override;
  [[nodiscard]] std::string hf_config_json(const train::ModelDefinition& model) const override;
  [[nodiscard]] Shape hf_shape(const std::string& name, const Shape& shape) const override {
    return hf_gpt2_shape(name, shape);
  }
  [[nodiscard]] std::vector<float> to_hf(const std::string& name, const Shape& shape,
                                         const std::vector<float>& values) const override {
    return to_hf_gpt2(name, shape, values);
  }
  void read_block(const ckpt::CheckpointReader& file, const std::string& hf_name,
                  const std::string& name, const Shape& shape, const ShardIndex& box,
                  float* out) const override {
    read_hf_gpt2_block(file, hf_name, name, shape, box, out);
  }
  void check_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                    const std::string& name, const Shape& shape) const override {
    check_hf_gpt2_tensor(file, hf_name, name, shape);
  }
  [[nodiscard]] std::string hf_name_of(const ckpt::CheckpointIndex& file,
                                       const std::string& name) const override;
  [[nodiscard]] bool ignored_tensor(const std::string& hf_name) const override;
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> tied_tensors() const override {
    return {{"lm_head.weight", "transformer.wte.weight"}};
  }
};

}  // namespace shardwise::models

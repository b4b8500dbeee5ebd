#pragma once
// How a model family's parameters move to and from Hugging Face's files: the names, shapes and
// layouts transformers keeps (which may differ from the trainer's: GPT-2's Conv1D weights are
// transposed), its config.json both ways, and the tensors a file may hold that are not
// parameters. `shardwise ckpt export` and `ckpt import` move any family through its adapter.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::models {

class HfAdapter {
 public:
  virtual ~HfAdapter() = default;
  // The --format that names it ("hf-gpt2") and what it is in words ("Hugging Face GPT-2").
  [[nodiscard]] virtual std::string format() const = 0;
  [[nodiscard]] virtual std::string words() const = 0;
  // The config.json "model_type"s it reads ("gpt2"; "llama" and "mistral").
  [[nodiscard]] virtual std::vector<std::string> model_types() const = 0;

  // The model a Hugging Face config.json describes; InvalidArgument naming the field where
  // the family would compute otherwise than it says. Each field it takes without knowing it
  // adds a line to `notes` (docs/huggingface.md), for the caller to show once.
  [[nodiscard]] virtual std::shared_ptr<const train::ModelDefinition> model_from_hf_config(
      const std::string& text, const std::string& what, std::vector<std::string>& notes) const = 0;
  // The same, for callers that show no notes.
  [[nodiscard]] std::shared_ptr<const train::ModelDefinition> model_from_hf_config(
      const std::string& text, const std::string& what) const {
    std::vector<std::string> notes;
    return model_from_hf_config(text, what, notes);
  }
  // config.json for `model` (a model of this family).
  [[nodiscard]] virtual std::string hf_config_json(const train::ModelDefinition& model) const = 0;

  // The shape and values of parameter `name` (trainer shape `shape`) in the file's layout.
  [[nodiscard]] virtual Shape hf_shape(const std::string& name, const Shape& shape) const = 0;
  [[nodiscard]] virtual std::vector<float> to_hf(const std::string& name, const Shape& shape,
                                                 const std::vector<float>& values) const = 0;
  // Reads the trainer's block `box` of parameter `name` from the file's tensor `hf_name` into
  // `out` (the box's elements, row-major).
  virtual void read_block(const ckpt::CheckpointReader& file, const std::string& hf_name,
                          const std::string& name, const Shape& shape, const ShardIndex& box,
                          float* out) const = 0;
  // CheckpointError naming the tensor where the file lacks it or holds it otherwise.
  virtual void check_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                            const std::string& name, const Shape& shape) const = 0;
  // Which of the file's tensors holds parameter `name` (files name them in more than one way);
  // CheckpointError where none does.
  [[nodiscard]] virtual std::string hf_name_of(const ckpt::CheckpointIndex& file,
                                               const std::string& name) const = 0;
  // The file's tensors that are no parameter and are left behind (buffers transformers
  // recomputes; tied copies, checked equal to their parameter).
  [[nodiscard]] virtual bool ignored_tensor(const std::string& hf_name) const = 0;
  // Tensors a file may hold as a copy of a parameter: (tensor, parameter), e.g. GPT-2's
  // ("lm_head.weight", "transformer.wte.weight").
  [[nodiscard]] virtual std::vector<std::pair<std::string, std::string>> tied_tensors() const = 0;
};

}  // namespace shardwise::models

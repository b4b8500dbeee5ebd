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

// One tensor of a Hugging Face file holding the block `box` of a parameter, in the parameter's
// layout and order: its shape `shape` is the box's extents, less leading extents of one (a
// Mixture of Experts' expert e's gate rows, box [e:e+1, 0:I, 0:C] of the stacked gate and up,
// are a tensor of shape (I, C)).
struct HfPiece {
  std::string tensor;
  ShardIndex box;
  Shape shape;
};

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
  // Where parameter `name` lies in `file`: by default one tensor (hf_name_of's) holding it
  // whole, in the layout of hf_shape (read_block reads it); a family may keep a parameter as
  // several tensors, each a block in the parameter's own layout (a Mixture of Experts' experts,
  // each expert's matrices their own tensors in published files). CheckpointError where the file
  // holds neither.
  [[nodiscard]] virtual std::vector<HfPiece> hf_pieces(const ckpt::CheckpointIndex& file,
                                                       const std::string& name,
                                                       const Shape& shape) const;
  // The tensors an export writes parameter `name` as: by default one, named as the parameter,
  // in hf_shape's layout (to_hf).
  [[nodiscard]] virtual std::vector<HfPiece> hf_export_pieces(const std::string& name,
                                                              const Shape& shape) const;
  // The file's tensors that are no parameter and are left behind (buffers transformers
  // recomputes; tied copies, checked equal to their parameter).
  [[nodiscard]] virtual bool ignored_tensor(const std::string& hf_name) const = 0;
  // Tensors a file may hold as a copy of a parameter: (tensor, parameter), e.g. GPT-2's
  // ("lm_head.weight", "transformer.wte.weight").
  [[nodiscard]] virtual std::vector<std::pair<std::string, std::string>> tied_tensors() const = 0;
};

// The box of a whole array of `shape`.
[[nodiscard]] ShardIndex whole_box(const Shape& shape);
// Whether `pieces` is the default: one tensor holding the parameter of `shape` whole.
[[nodiscard]] bool holds_whole(const std::vector<HfPiece>& pieces, const Shape& shape);

}  // namespace shardwise::models

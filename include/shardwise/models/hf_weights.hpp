#pragma once
// A Hugging Face weights file read as a model's parameters, through its family's adapter: found
// in a folder (model.safetensors, or model.safetensors.index.json and the parts it names, as
// transformers shards a model, each read through a link where it is one, as Hugging Face's cache
// keeps them; a folder of other formats refused naming what it holds), checked
// whole against the model before any value is read (every parameter present in the family's layout
// and a float dtype, no tensor but buffers and tied copies besides), then read block by block, each
// block's values finite and a tied copy equal to its parameter. `shardwise ckpt import` and
// `shardwise train --init-from` read files through it alone.

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/models/hf_adapter.hpp"
#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::models {

// The weights `path` names: the file, or the folder's model.safetensors or (sharded)
// model.safetensors.index.json; InvalidArgument saying what a folder holds instead.
[[nodiscard]] std::filesystem::path hf_weights_file(const std::string& path);

// The adapter of `model`'s family; InvalidArgument where the family has none.
[[nodiscard]] const HfAdapter& hf_adapter_of(const train::ModelDefinition& model);

class HfWeights {
 public:
  // Opens `file` (a .safetensors file, or a model.safetensors.index.json and every part it
  // names) and checks it holds `model` (CheckpointError naming the tensor otherwise).
  HfWeights(std::filesystem::path file, const HfAdapter& adapter,
            std::shared_ptr<const train::ModelDefinition> model);

  [[nodiscard]] const std::filesystem::path& file() const { return file_; }
  // The model the file's folder's config.json describes, by `adapter`; a field the reader takes
  // without knowing it adds a line to `notes`.
  [[nodiscard]] static std::shared_ptr<const train::ModelDefinition> folder_model(
      const std::filesystem::path& file, const HfAdapter& adapter, std::vector<std::string>& notes);
  // The same, for callers that show no notes.
  [[nodiscard]] static std::shared_ptr<const train::ModelDefinition> folder_model(
      const std::filesystem::path& file, const HfAdapter& adapter);

  // Reads the block `box` of parameter `name` (the model's) into `out`, the box's elements
  // row-major; CheckpointError where a value is not finite or a tied copy differs.
  void read(const std::string& name, const ShardIndex& box, float* out) const;

 private:
  std::filesystem::path file_;
  const HfAdapter& adapter_;
  std::shared_ptr<const train::ModelDefinition> model_;
  // The file's parts (one for model.safetensors), their tensors as one index, and each
  // tensor's part.
  std::vector<ckpt::CheckpointReader> readers_;
  ckpt::CheckpointIndex index_;
  std::map<std::string, std::size_t> part_of_;
  [[nodiscard]] const ckpt::CheckpointReader& reader_of(const std::string& tensor) const;
  // The box `box` of parameter `name`, kept as several tensors (`pieces`), into `out`.
  void read_pieces(const std::vector<HfPiece>& pieces, const std::string& name,
                   const ShardIndex& box, float* out) const;
  std::vector<train::ParameterSpec> specs_;
  std::vector<std::vector<HfPiece>> pieces_;  // the file's tensors of each parameter
  // (tensor, parameter): the file's copies of a parameter the model ties.
  std::vector<std::pair<std::string, std::string>> tied_;
};

// A run's start from the weights in `path` (a folder or its model.safetensors) of `model`: each
// rank opens the file and reads its blocks (train::CheckpointPolicy::init_from). The file is
// checked once here, before any rank starts.
[[nodiscard]] train::InitialValues hf_initial_values(
    const std::string& path, std::shared_ptr<const train::ModelDefinition> model);

}  // namespace shardwise::models

#pragma once
// --model of `shardwise train` and `shardwise plan`: one reader, so that both commands see the
// same model in the same file.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::cli {

struct ModelArgument {
  // The model the trainer builds: a preset of a registered family (models/model_registry.hpp),
  // a model file of one, or a Hugging Face config.json of one. Null for other descriptions.
  std::shared_ptr<const train::ModelDefinition> model;
  // Every parameter's name, shape and dtype: the model's manifest, else the manifest,
  // config.json or .safetensors header the file holds.
  ModelManifest manifest;
  // Why the family a Hugging Face config.json names refuses it (the planner may still read it,
  // as it reads Qwen2's biases); empty otherwise.
  std::string refusal;
  // What the family's reader of a config.json took without knowing it (fields a newer
  // transformers writes), for the command to show.
  std::vector<std::string> notes;
};

// Reads `value` given to `flag`; an InvalidArgument naming the flag and the file otherwise.
ModelArgument read_model_argument(const std::string& value, const std::string& flag);

// A preset's name, or a model file of a registered family, read as `shardwise plan` reads it;
// InvalidArgument naming `flag` where it describes parameters rather than a model the trainer
// builds.
std::shared_ptr<const train::ModelDefinition> model_definition(
    const std::string& value, const std::string& flag, std::vector<std::string>* notes = nullptr);

}  // namespace shardwise::cli

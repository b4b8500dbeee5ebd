#pragma once
// What a model setting names, resolved once for the trainer, the planner, checkpoints and
// generation (the command's --model and --init-from, and the library's callers): a preset of a
// registered family, a model file of one, a Hugging Face config.json or model folder, a
// manifest, or a .safetensors file.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::models {

struct ResolvedModel {
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

// Reads `value`, the setting the caller calls `setting` ("model", or a command's "--model"); an
// InvalidArgument naming the setting and the file otherwise.
ResolvedModel resolve_model(const std::string& value, const std::string& setting);

// The model the trainer builds from `value`, resolved as resolve_model resolves it; an
// InvalidArgument naming `setting` where it describes parameters rather than such a model, or
// where the family refuses the config. `notes` receives what the reader took without knowing.
std::shared_ptr<const train::ModelDefinition> model_definition(
    const std::string& value, const std::string& setting,
    std::vector<std::string>* notes = nullptr);

}  // namespace shardwise::models

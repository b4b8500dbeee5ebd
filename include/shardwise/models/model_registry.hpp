#pragma once
// The model families the commands know, found by name: `shardwise train`, `plan`, `specs` and
// `ckpt` build a model from a preset's name, a model file or a checkpoint's metadata through
// these functions alone, so that a new family is one entry here (the GPT's is the first) and
// no command names it.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/models/hf_adapter.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::models {

struct ModelFamily {
  std::string name;  // "gpt": what a configuration's "family" says
  std::string summary;
  std::vector<std::string> presets;
  // The model of one of `presets`.
  std::function<std::shared_ptr<const train::ModelDefinition>(const std::string& preset)> preset;
  // The model a configuration object of this family describes (a model file, a checkpoint's
  // "model"); an InvalidArgument starting with `what` where it is this family's but wrong.
  std::function<std::shared_ptr<const train::ModelDefinition>(std::string_view json,
                                                              const std::string& what)>
      from_config;
  // Whether a parsed configuration object's text is this family's (its "family", or the keys
  // only this family's has).
  std::function<bool(std::string_view json)> recognizes;
  // Its Hugging Face adapter (import and export); null where it has none.
  std::shared_ptr<const HfAdapter> hugging_face;
};

// Every registered family, the built-in ones first.
[[nodiscard]] const std::vector<ModelFamily>& model_families();
// Adds a family (a program's own model, for the commands' functions below); InvalidArgument
// where its name or a preset is taken already. Register before other threads read the
// registry (model_families hands out a reference to the list).
void register_model_family(ModelFamily family);
// The family named `name`; InvalidArgument naming `field` and the known names otherwise.
[[nodiscard]] const ModelFamily& model_family(const std::string& name, const std::string& field);
// "tiny, small, gpt2": every family's presets, for messages.
[[nodiscard]] std::string preset_names();
// Whether `name` is a preset of any family.
[[nodiscard]] bool is_preset(const std::string& name);

// The model `value` names: a preset, or a model file's JSON text (`text`, already read) of a
// family the registry recognises; InvalidArgument naming `field` otherwise.
[[nodiscard]] std::shared_ptr<const train::ModelDefinition> model_from_preset(
    const std::string& name, const std::string& field);
[[nodiscard]] std::shared_ptr<const train::ModelDefinition> model_from_config(
    std::string_view json, const std::string& what);
// The model a Hugging Face config.json describes, through the adapter of the family that reads
// its "model_type"; null where no family reads it (the planner may still read such a config as
// a manifest). InvalidArgument starting with `what` where the family refuses a field; a field
// the family takes without knowing it adds a line to `notes` (docs/huggingface.md).
[[nodiscard]] std::shared_ptr<const train::ModelDefinition> model_from_hf_config(
    std::string_view json, const std::string& what, std::vector<std::string>& notes);
// The same, for callers that show no notes.
[[nodiscard]] std::shared_ptr<const train::ModelDefinition> model_from_hf_config(
    std::string_view json, const std::string& what);
// The model of a Hugging Face folder's config.json, which must be one: InvalidArgument starting
// with `what` (the file) where the text is no JSON (with the parser's words), no object, has no
// "model_type" or one no family reads (naming it and the types that are read), or where the
// family refuses a field.
[[nodiscard]] std::shared_ptr<const train::ModelDefinition> read_hf_config(
    std::string_view json, const std::string& what, std::vector<std::string>& notes);
// "gpt2, llama, mistral": the model_types the registered families read, for messages.
[[nodiscard]] std::string hf_model_types();
// Whether a configuration object is a model the registry can build (rather than a manifest or
// another description).
[[nodiscard]] bool is_model_config(std::string_view json);

}  // namespace shardwise::models

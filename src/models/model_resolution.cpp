#include "shardwise/models/model_resolution.hpp"

#include <sys/stat.h>

#include <fstream>

#include "../detail/file_io.hpp"
#include "../detail/json_reader.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/plan/model_shape.hpp"

namespace shardwise::models {
namespace {

ModelManifest safetensors_manifest(const std::string& path, const std::string& setting) {
  const std::string named = setting + " '" + path + "'";
  // Checked before it is opened: opening a pipe would wait for a writer.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw InvalidArgument(named + " is not a readable regular file");
  }
  try {
    const auto [header, data_bytes] = ckpt::read_safetensors_header(path);
    return plan::manifest_from_safetensors_header(header, data_bytes);
  } catch (const Error& e) {
    throw InvalidArgument(setting + " " + e.what());
  }
}

ResolvedModel of_model(std::shared_ptr<const train::ModelDefinition> model) {
  ModelManifest manifest = model->manifest();
  return {std::move(model), std::move(manifest), {}, {}};
}

}  // namespace

ResolvedModel resolve_model(const std::string& value, const std::string& setting) {
  if (is_preset(value)) return of_model(model_from_preset(value, setting));
  if (value.size() > 12 && value.substr(value.size() - 12) == ".safetensors") {
    return {nullptr, safetensors_manifest(value, setting), {}, {}};
  }
  struct stat info {};
  if (::stat(value.c_str(), &info) != 0) {
    throw InvalidArgument(setting + ": '" + echo_input(value) + "' is neither a model (" +
                          preset_names() + ") nor a readable file");
  }
  // A Hugging Face model folder: its config.json.
  const std::string path = S_ISDIR(info.st_mode) ? value + "/config.json" : value;
  if (S_ISDIR(info.st_mode) && ::stat(path.c_str(), &info) != 0) {
    throw InvalidArgument(setting + " '" + echo_input(value) +
                          "' is a directory, not a file (nor a Hugging Face model folder: it has "
                          "no config.json)");
  }
  const std::string named = setting + " '" + path + "'";
  const std::string text = shardwise::detail::read_file(path, setting);
  try {
    const nlohmann::json json = shardwise::detail::parse_json(text, named);
    if (is_model_config(text)) return of_model(model_from_config(text, named));
    // A config.json of a family the trainer builds: what `train` runs. The planner reads it as
    // it is (its dtype, and fields the family refuses, such as Qwen2's biases).
    ResolvedModel described;
    try {
      described.model = model_from_hf_config(text, named, described.notes);
    } catch (const InvalidArgument& e) {
      described.refusal = e.what();
    }
    // The planner's own reading (and its messages); a config it cannot read that the family
    // builds is planned as the family builds it.
    try {
      described.manifest = load_model_description(text);
    } catch (const Error&) {
      if (!described.model) throw;
      described.manifest = described.model->manifest();
    }
    return described;
  } catch (const Error& e) {
    // Messages of the readers below name the file themselves or not at all.
    const std::string message = e.what();
    throw InvalidArgument(message.find(named) != std::string::npos ? message
                                                                   : named + ": " + message);
  }
}

std::shared_ptr<const train::ModelDefinition> model_definition(const std::string& value,
                                                               const std::string& setting,
                                                               std::vector<std::string>* notes) {
  ResolvedModel argument = resolve_model(value, setting);
  if (notes != nullptr) notes->insert(notes->end(), argument.notes.begin(), argument.notes.end());
  if (!argument.refusal.empty()) throw InvalidArgument(argument.refusal);
  if (!argument.model) {
    throw InvalidArgument(setting + " '" + echo_input(value) +
                          "' describes parameters, not a model the trainer can build; give " +
                          preset_names() +
                          " or a model file (a GPT's: n_layer, n_head, n_embd, block_size and "
                          "vocab_size)");
  }
  return std::move(argument.model);
}

}  // namespace shardwise::models

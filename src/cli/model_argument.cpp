#include "model_argument.hpp"

#include <sys/stat.h>

#include <fstream>

#include "../detail/json_reader.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/plan/model_shape.hpp"
#include "text_table.hpp"

namespace shardwise::cli {
namespace {

ModelManifest safetensors_manifest(const std::string& path, const std::string& flag) {
  const std::string named = flag + " '" + path + "'";
  // Checked before it is opened: opening a pipe would wait for a writer.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw InvalidArgument(named + " is not a readable regular file");
  }
  try {
    const auto [header, data_bytes] = ckpt::read_safetensors_header(path);
    return plan::manifest_from_safetensors_header(header, data_bytes);
  } catch (const Error& e) {
    throw InvalidArgument(flag + " " + e.what());
  }
}

ModelArgument of_model(std::shared_ptr<const train::ModelDefinition> model) {
  ModelManifest manifest = model->manifest();
  return {std::move(model), std::move(manifest), {}, {}};
}

}  // namespace

ModelArgument read_model_argument(const std::string& value, const std::string& flag) {
  if (models::is_preset(value)) return of_model(models::model_from_preset(value, flag));
  if (value.size() > 12 && value.substr(value.size() - 12) == ".safetensors") {
    return {nullptr, safetensors_manifest(value, flag), {}, {}};
  }
  struct stat info {};
  if (::stat(value.c_str(), &info) != 0) {
    throw InvalidArgument(flag + ": '" + echo_input(value) + "' is neither a model (" +
                          models::preset_names() + ") nor a readable file");
  }
  // A Hugging Face model folder: its config.json.
  const std::string path = S_ISDIR(info.st_mode) ? value + "/config.json" : value;
  if (S_ISDIR(info.st_mode) && ::stat(path.c_str(), &info) != 0) {
    throw InvalidArgument(flag + " '" + echo_input(value) +
                          "' is a directory, not a file (nor a Hugging Face model folder: it has "
                          "no config.json)");
  }
  const std::string named = flag + " '" + path + "'";
  const std::string text = read_file(path, flag);
  try {
    const nlohmann::json json = shardwise::detail::parse_json(text, named);
    if (models::is_model_config(text)) return of_model(models::model_from_config(text, named));
    // A config.json of a family the trainer builds: what `train` runs. The planner reads it as
    // it is (its dtype, and fields the family refuses, such as Qwen2's biases).
    ModelArgument described;
    try {
      described.model = models::model_from_hf_config(text, named, described.notes);
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
                                                               const std::string& flag,
                                                               std::vector<std::string>* notes) {
  ModelArgument argument = read_model_argument(value, flag);
  if (notes != nullptr) notes->insert(notes->end(), argument.notes.begin(), argument.notes.end());
  if (!argument.refusal.empty()) throw InvalidArgument(argument.refusal);
  if (!argument.model) {
    throw InvalidArgument(flag + " '" + echo_input(value) +
                          "' describes parameters, not a model the trainer can build; give " +
                          models::preset_names() +
                          " or a model file (a GPT's: n_layer, n_head, n_embd, block_size and "
                          "vocab_size)");
  }
  return std::move(argument.model);
}

}  // namespace shardwise::cli

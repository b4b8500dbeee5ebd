#include "shardwise/models/hf_weights.hpp"

#include <algorithm>

#include "../detail/file_io.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/model_registry.hpp"

namespace shardwise::models {

std::filesystem::path hf_weights_file(const std::string& path) {
  std::filesystem::path file = path;
  std::error_code error;
  if (!std::filesystem::is_directory(file, error)) return file;
  file /= "model.safetensors";
  if (shardwise::detail::path_kind(file) != shardwise::detail::PathKind::kAbsent) return file;
  const std::string named = "'" + echo_input(path, 200) + "'";
  const std::string supported =
      "; shardwise imports one model.safetensors (with config.json beside it)";
  if (std::filesystem::exists(std::filesystem::path(path) / "model.safetensors.index.json")) {
    throw InvalidArgument(named +
                          " holds a sharded model (model.safetensors.index.json and its "
                          "parts)" +
                          supported +
                          ": save it unsharded (save_pretrained with a max_shard_size past "
                          "its size) or give one part's file");
  }
  for (const char* other :
       {"pytorch_model.bin", "model.bin", "tf_model.h5", "flax_model.msgpack"}) {
    if (std::filesystem::exists(std::filesystem::path(path) / other)) {
      throw InvalidArgument(named + " holds " + other + ", not model.safetensors" + supported +
                            ": save it with save_pretrained(..., safe_serialization=True)");
    }
  }
  throw InvalidArgument(named + " holds no model.safetensors" + supported);
}

const HfAdapter& hf_adapter_of(const train::ModelDefinition& model) {
  const ModelFamily& family = model_family(model.family(), "the model");
  if (!family.hugging_face) {
    throw InvalidArgument("the model family '" + family.name + "' has no Hugging Face format");
  }
  return *family.hugging_face;
}

std::shared_ptr<const train::ModelDefinition> HfWeights::folder_model(
    const std::filesystem::path& file, const HfAdapter& adapter) {
  const std::filesystem::path config =
      (file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path()) /
      "config.json";
  return adapter.model_from_hf_config(shardwise::detail::read_file(config.string(), "config.json"),
                                      "'" + echo_input(config.string(), 200) + "'");
}

HfWeights::HfWeights(std::filesystem::path file, const HfAdapter& adapter,
                     std::shared_ptr<const train::ModelDefinition> model)
    : file_(std::move(file)),
      adapter_(adapter),
      model_(std::move(model)),
      reader_(ckpt::CheckpointReader::from_safetensors(file_)),
      specs_(model_->parameters()) {
  // The file's copies of a parameter the model ties (a tensor that is itself a parameter, as an
  // untied model's head, is no copy).
  for (const auto& pair : adapter_.tied_tensors()) {
    if (std::none_of(specs_.begin(), specs_.end(),
                     [&](const train::ParameterSpec& spec) { return spec.name == pair.first; })) {
      tied_.push_back(pair);
    }
  }
  const ckpt::CheckpointIndex& index = reader_.index();
  for (const train::ParameterSpec& spec : specs_) {
    tensors_.push_back(adapter_.hf_name_of(index, spec.name));
    adapter_.check_tensor(reader_, tensors_.back(), spec.name, spec.shape);
  }
  for (const ckpt::ArrayRecord& array : index.arrays) {
    const bool tied_copy = std::any_of(tied_.begin(), tied_.end(),
                                       [&](const auto& pair) { return pair.first == array.name; });
    if (std::find(tensors_.begin(), tensors_.end(), array.name) == tensors_.end() &&
        !adapter_.ignored_tensor(array.name) && !tied_copy) {
      throw ckpt::CheckpointError("the file's tensor '" + echo_input(array.name, 200) +
                                  "' is no parameter of " + model_->describe());
    }
  }
  for (const auto& [tensor, parameter] : tied_) {
    if (index.find(tensor) == nullptr) continue;
    for (const train::ParameterSpec& spec : specs_) {
      if (spec.name == parameter) adapter_.check_tensor(reader_, tensor, spec.name, spec.shape);
    }
  }
}

void HfWeights::read(const std::string& name, const ShardIndex& box, float* out) const {
  const auto it = std::find_if(specs_.begin(), specs_.end(),
                               [&](const train::ParameterSpec& spec) { return spec.name == name; });
  if (it == specs_.end()) {
    throw InvalidArgument("'" + echo_input(name, 200) + "' is no parameter of " +
                          model_->describe());
  }
  const train::ParameterSpec& spec = *it;
  const std::string& tensor = tensors_[static_cast<std::size_t>(it - specs_.begin())];
  const auto count = static_cast<std::size_t>(num_elements(shape_of(box)));
  adapter_.read_block(reader_, tensor, spec.name, spec.shape, box, out);
  if (std::string bad = train::non_finite_value({out, count}, tensor, box,
                                                "'" + echo_input(file_.string(), 200) + "'");
      !bad.empty()) {
    throw ckpt::CheckpointError(bad);
  }
  const ckpt::CheckpointIndex& index = reader_.index();
  for (const auto& [copy_name, parameter] : tied_) {
    if (spec.name != parameter || index.find(copy_name) == nullptr) continue;
    // A tied copy that differs would be dropped in silence: refused instead.
    std::vector<float> copy(count);
    adapter_.read_block(reader_, copy_name, spec.name, spec.shape, box, copy.data());
    if (!std::equal(copy.begin(), copy.end(), out)) {
      throw ckpt::CheckpointError("the file's " + copy_name + " differs from its " + parameter +
                                  "; the model ties them");
    }
  }
}

train::InitialValues hf_initial_values(const std::string& path,
                                       std::shared_ptr<const train::ModelDefinition> model) {
  const HfAdapter& adapter = hf_adapter_of(*model);
  const std::filesystem::path file = hf_weights_file(path);
  (void)HfWeights(file, adapter, model);  // refused here, before any rank starts
  return [file, &adapter, model](std::span<const train::ParameterBlock> blocks) {
    const HfWeights weights(file, adapter, model);
    for (const train::ParameterBlock& block : blocks) {
      weights.read(block.name, block.box, block.values.data());
    }
  };
}

}  // namespace shardwise::models

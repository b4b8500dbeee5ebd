#include "shardwise/train/decoding_model.hpp"

#include <charconv>
#include <string>

#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/placement.hpp"
#include "shardwise/train/settings_agreement.hpp"

namespace shardwise::train {
namespace {

std::vector<ParameterSpec> decoding_blocks(const ModelDefinition& model,
                                           const ParallelContext& context) {
  DecodingModel::check_mesh(context.mesh());
  if (!model.decodes()) {
    throw InvalidArgument(
        "the model family '" + model.family() +
        "' does not generate: it has no decoder (ModelDefinition::build_decoder)");
  }
  const int degree = model_degree(context.mesh());
  return local_parameters(model.parameters(), context.mesh(), context.rank(),
                          model.model_placements(degree), model.shared_rows(degree));
}

// What every rank must agree on, each as exact text (a double by its shortest round-trip form).
std::vector<Setting> generation_settings(const ModelDefinition& model,
                                         const std::string& values_identity, Precision precision,
                                         std::span<const std::int32_t> prompt,
                                         const GenerationOptions& options) {
  const auto text = [](double value) {
    char buffer[32];
    return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
  };
  const auto ids = [](std::span<const std::int32_t> values) {
    std::string joined;
    for (const std::int32_t id : values) joined += std::to_string(id) + ",";
    return joined;
  };
  return {{"model", model.describe()},
          {"weights", values_identity},
          {"precision", to_string(precision)},
          {"prompt", ids(prompt)},
          {"max_new_tokens", std::to_string(options.max_new_tokens)},
          {"temperature", text(options.sampling.temperature)},
          {"top_k", std::to_string(options.sampling.top_k)},
          {"top_p", text(options.sampling.top_p)},
          {"seed", std::to_string(options.sampling.seed)},
          {"stop_tokens", ids(options.stop_tokens)}};
}

}  // namespace

void DecodingModel::check_mesh(const Mesh& mesh, const SettingNames& named) {
  for (std::size_t a = 0; a < mesh.axis_names().size(); ++a) {
    if (mesh.axis_names()[a] != kModelAxis && mesh.axis_sizes()[a] > 1) {
      throw InvalidArgument(
          named("mesh") + ": generation splits a model over a 'model' axis alone; '" +
          mesh.axis_names()[a] + "' has size " + std::to_string(mesh.axis_sizes()[a]));
    }
  }
}

DecodingModel::DecodingModel(std::shared_ptr<const ModelDefinition> model,
                             const ParallelContext& context, const InitialValues& values,
                             std::size_t capacity, std::string values_identity, Precision precision)
    : model_(std::move(model)),
      values_identity_(std::move(values_identity)),
      precision_(precision),
      world_(&context.world()),
      tp_(context),
      store_(decoding_blocks(*model_, context), ParameterStore::Gradients::kNone) {
  std::string error;
  try {
    std::vector<ParameterBlock> blocks;
    for (std::size_t p = 0; p < store_.specs().size(); ++p) {
      const ParameterSpec& spec = store_.specs()[p];
      ShardIndex box = spec.block;
      if (box.empty()) {
        for (const std::int64_t size : spec.shape) box.push_back({0, size});
      }
      blocks.push_back(
          {spec.name, spec.whole_shape(), box, std::span<float>(store_.value(p), store_.count(p))});
    }
    values(blocks);
    store_.mark_values_changed();
    decoder_ = model_->build_decoder(store_, tp_, capacity, precision);
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {  // a file system's error too, not only bad input
    error = e.what();
  }
  ckpt::throw_unless_all_succeeded(context.world(), error, "model not loaded");
}

GenerationResult DecodingModel::generate(std::span<const std::int32_t> prompt,
                                         const GenerationOptions& options) {
  check_ranks_agree(*world_,
                    generation_settings(*model_, values_identity_, precision_, prompt, options));
  return train::generate(*decoder_, tp_, prompt, options);
}

}  // namespace shardwise::train

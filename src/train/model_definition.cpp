#include "shardwise/train/model_definition.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise::train {

std::string ModelDefinition::describe_config(const std::string& config_json) const {
  return "a model of " + echo_input(config_json, 200);
}

std::vector<SharedRows> ModelDefinition::shared_rows(int /*degree*/) const { return {}; }

std::unique_ptr<Decoder> ModelDefinition::build_decoder(ParameterStore& /*store*/,
                                                        const TensorParallel& /*tensor_parallel*/,
                                                        std::size_t /*capacity*/,
                                                        Precision /*precision*/) const {
  throw InvalidArgument("the model family '" + family() +
                        "' does not generate: it has no decoder (ModelDefinition::build_decoder)");
}

std::vector<std::size_t> chunk_parameter_indices(const ModelDefinition& model,
                                                 const ParameterStore& store,
                                                 const LayerRange& range, int degree) {
  // What the chunk reads, by name: its parameters are found in the store among any others.
  const std::vector<std::string> held = model.chunk_parameters(range);
  const std::vector<ParameterSpec> whole = model.parameters();
  const std::vector<PartitionSpec> placements = model.model_placements(degree);
  std::vector<std::size_t> shared_blocks(whole.size(), 1);
  for (const SharedRows& rows : model.shared_rows(degree))
    shared_blocks.at(rows.parameter) = rows.blocks;
  std::vector<std::size_t> index(whole.size(), kNotHeld);
  for (std::size_t p = 0; p < whole.size(); ++p) {
    const ParameterSpec& spec = whole[p];
    if (std::find(held.begin(), held.end(), spec.name) == held.end()) continue;
    const std::size_t i = store.index_of(spec.name);
    const ParameterSpec& in_store = store.specs()[i];
    Shape local = spec.shape;
    for (std::size_t d = 0; d < placements[p].size(); ++d) {
      if (!placements[p].entry(d).is_replicated()) local[d] /= degree;
    }
    if (!local.empty()) local[0] /= static_cast<std::int64_t>(shared_blocks[p]);
    if (in_store.whole_shape() != spec.shape || in_store.shape != local) {
      throw InvalidArgument(
          "parameter '" + spec.name + "' has shape " + shardwise::to_string(in_store.shape) +
          " of " + shardwise::to_string(in_store.whole_shape()) + "; the model needs " +
          shardwise::to_string(local) + " of " + shardwise::to_string(spec.shape));
    }
    index[p] = i;
  }
  return index;
}

void check_model_placements(const ModelDefinition& model, int degree,
                            const std::vector<PartitionSpec>& placements) {
  const std::vector<ParameterSpec> whole = model.parameters();
  const std::vector<PartitionSpec> needed = model.model_placements(degree);
  if (placements.size() != whole.size()) {
    throw InvalidArgument(std::to_string(placements.size()) + " placements for the model's " +
                          std::to_string(whole.size()) + " parameters");
  }
  for (std::size_t p = 0; p < whole.size(); ++p) {
    if (placements[p] != needed[p]) {
      throw InvalidArgument("parameter '" + whole[p].name + "' would be split over 'model' by " +
                            placements[p].to_string() + "; the model's layers split it by " +
                            needed[p].to_string() +
                            " (Megatron-LM's column- and row-parallel layers)");
    }
  }
}

}  // namespace shardwise::train

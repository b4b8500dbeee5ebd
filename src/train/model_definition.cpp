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

std::vector<PartitionSpec> fixed_placements(const ModelDefinition& model, int degree,
                                            int expert_degree) {
  std::vector<PartitionSpec> placements = model.model_placements(degree);
  if (expert_degree == 1) return placements;
  if (expert_degree < 1) {
    throw InvalidArgument("the expert degree " + std::to_string(expert_degree) +
                          " is not positive");
  }
  const std::vector<ParameterSpec> whole = model.parameters();
  bool experts = false;
  for (std::size_t p = 0; p < whole.size(); ++p) {
    const ParameterSpec& spec = whole[p];
    if (spec.logical_axes.empty() || spec.logical_axes.front() != "experts") continue;
    experts = true;
    std::vector<SpecEntry> entries = placements[p].entries();
    if (entries.empty()) entries.emplace_back();
    // Folded over the model axis too where the family splits the experts over it, model major
    // (as the strategies' claims combine: the tensor strategy's first).
    const std::vector<std::string> before = entries.front().axes();
    const bool over_model = before == std::vector<std::string>{std::string(kModelAxis)};
    if (!before.empty() && !over_model) {
      throw InvalidArgument("parameter '" + spec.name + "' is split over " +
                            placements[p].to_string() +
                            " along its experts; the expert axis splits them, with the model "
                            "axis or alone");
    }
    const std::int64_t ranks = expert_degree * (over_model ? degree : 1);
    if (spec.shape[0] % ranks != 0) {
      throw InvalidArgument("the expert degree " + std::to_string(expert_degree) +
                            (over_model ? " x the model degree " + std::to_string(degree) : "") +
                            " does not divide the " + std::to_string(spec.shape[0]) +
                            " experts of parameter '" + spec.name +
                            "' (each rank holds as many experts)");
    }
    entries.front() =
        over_model
            ? SpecEntry(std::vector<std::string>{std::string(kModelAxis), std::string(kExpertAxis)})
            : SpecEntry(std::string(kExpertAxis));
    placements[p] = PartitionSpec(std::move(entries));
  }
  if (!experts) {
    throw InvalidArgument("an expert axis of " + std::to_string(expert_degree) +
                          " ranks: the model has no experts to split (the expert axis splits a "
                          "Mixture of Experts' experts; a dense model splits its batch over data "
                          "or fsdp)");
  }
  return placements;
}

std::vector<std::size_t> chunk_parameter_indices(const ModelDefinition& model,
                                                 const ParameterStore& store,
                                                 const LayerRange& range, int degree,
                                                 int expert_degree) {
  // What the chunk reads, by name: its parameters are found in the store among any others.
  const std::vector<std::string> held = model.chunk_parameters(range);
  const std::vector<ParameterSpec> whole = model.parameters();
  const std::vector<PartitionSpec> placements = fixed_placements(model, degree, expert_degree);
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
      for (const std::string& axis : placements[p].entry(d).axes()) {
        local[d] /= axis == kExpertAxis ? expert_degree : degree;
      }
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

void check_model_placements(const ModelDefinition& model, int degree, int expert_degree,
                            const std::vector<PartitionSpec>& placements) {
  const std::vector<ParameterSpec> whole = model.parameters();
  const std::vector<PartitionSpec> needed = fixed_placements(model, degree, expert_degree);
  if (placements.size() != whole.size()) {
    throw InvalidArgument(std::to_string(placements.size()) + " placements for the model's " +
                          std::to_string(whole.size()) + " parameters");
  }
  for (std::size_t p = 0; p < whole.size(); ++p) {
    if (placements[p] != needed[p]) {
      throw InvalidArgument("parameter '" + whole[p].name + "' would be split for good by " +
                            placements[p].to_string() + "; the model's layers split it by " +
                            needed[p].to_string() +
                            " (Megatron-LM's column- and row-parallel layers, the experts over "
                            "the expert axis)");
    }
  }
}

}  // namespace shardwise::train

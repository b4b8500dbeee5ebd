#include "shardwise/train/model_definition.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::train {

std::string ModelDefinition::describe_config(const std::string& config_json) const {
  return "a model of " + echo_input(config_json, 200);
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

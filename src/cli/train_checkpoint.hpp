#pragma once
// What a training checkpoint's metadata says of its model, for `shardwise ckpt`: the model,
// built by its family in the registry, its step, and whether it holds optimizer state.

#include <cstdint>
#include <memory>
#include <string>

#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::cli {

struct CheckpointInfo {
  std::shared_ptr<const train::ModelDefinition> model;
  std::int64_t step = 0;
  bool has_optimizer = false;
};

// CheckpointError naming the field where the metadata lacks the step or a model of a known
// family.
[[nodiscard]] CheckpointInfo checkpoint_info(const ckpt::CheckpointIndex& index,
                                             const std::string& what);

}  // namespace shardwise::cli

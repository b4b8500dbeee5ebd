#include "train_checkpoint.hpp"

#include <nlohmann/json.hpp>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/train/checkpoint_manager.hpp"

namespace shardwise::cli {

CheckpointInfo checkpoint_info(const ckpt::CheckpointIndex& index, const std::string& what) {
  const nlohmann::json metadata = nlohmann::json::parse(index.metadata_json);
  CheckpointInfo info;
  info.step = train::checkpoint_step(index, what);
  const auto model = metadata.find("model");
  if (model == metadata.end() || !model->is_object()) {
    throw ckpt::CheckpointError(what + ": metadata \"model\" is missing");
  }
  try {
    info.model = models::model_from_config(model->dump(), what + ": metadata model");
  } catch (const InvalidArgument& e) {
    throw ckpt::CheckpointError(e.what());
  }
  for (const ckpt::ArrayRecord& array : index.arrays) {
    info.has_optimizer = info.has_optimizer || array.name.rfind("optimizer/", 0) == 0;
  }
  return info;
}

}  // namespace shardwise::cli

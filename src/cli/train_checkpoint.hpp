#pragma once
// The GPT's side of its checkpoints: what the metadata says of the model, in words and as a
// GptConfig, for the library's checkpoint manager (train/checkpoint_manager.hpp) and for
// `shardwise ckpt`.

#include <cstdint>
#include <string>

#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/checkpoint_manager.hpp"

namespace shardwise::cli {

// What a checkpoint's metadata says of the run that saved it.
struct CheckpointInfo {
  models::GptConfig gpt;
  std::int64_t step = 0;
  bool has_optimizer = false;
};

// The metadata's "model" object of a GPT.
[[nodiscard]] std::string gpt_metadata_json(const models::GptConfig& gpt);

// The GPT as the checkpoint manager sees it: its metadata object, its words, its parameters.
[[nodiscard]] train::CheckpointedModel gpt_checkpointed_model(const models::GptConfig& gpt);

// CheckpointError naming the field where the metadata lacks the step or the model.
[[nodiscard]] CheckpointInfo checkpoint_info(const ckpt::CheckpointIndex& index,
                                             const std::string& what);

}  // namespace shardwise::cli

#pragma once
// --model of `shardwise train` and `shardwise plan`: one reader, so that both commands see the
// same model in the same file.

#include <optional>
#include <string>

#include "shardwise/models/gpt.hpp"
#include "shardwise/strategy/model_manifest.hpp"

namespace shardwise::cli {

struct ModelArgument {
  // The GPT the trainer builds: a preset (tiny, small, gpt2) or the trainer's model file
  // (n_layer, n_head, n_embd, block_size, vocab_size). Absent for other descriptions.
  std::optional<models::GptConfig> gpt;
  // Every parameter's name, shape and dtype: the GPT's as gpt_manifest gives them, else
  // the manifest, config.json or .safetensors header the file holds.
  ModelManifest manifest;
};

// Reads `value` given to `flag`; an InvalidArgument naming the flag and the file otherwise.
ModelArgument read_model_argument(const std::string& value, const std::string& flag);

// A preset's name, or the trainer's model file (n_layer, n_head, n_embd, block_size,
// vocab_size), read as `shardwise plan` reads it; InvalidArgument naming `flag` where it
// describes parameters rather than a GPT.
models::GptConfig gpt_model_config(const std::string& value, const std::string& flag);

}  // namespace shardwise::cli

#pragma once
// The trainer's model file, read from an already parsed document (for callers that parse once
// and then decide what the document describes).

#include <nlohmann/json.hpp>
#include <string>

#include "shardwise/models/gpt.hpp"

namespace shardwise::models::detail {

// Whether `json` is the trainer's model file rather than a manifest or a Hugging Face
// config.json: an object with "block_size" (nanoGPT's name for the context).
[[nodiscard]] bool is_gpt_config(const nlohmann::json& json);

// The GptConfig `json` describes: exactly n_layer, n_head, n_embd, block_size and vocab_size,
// each a positive integer; an InvalidArgument starting with `what` otherwise.
[[nodiscard]] GptConfig gpt_config_of(const nlohmann::json& json, const std::string& what);

}  // namespace shardwise::models::detail

#pragma once
// load_model_description for a document already parsed (callers that parse once and then
// decide what it describes).

#include <nlohmann/json.hpp>

#include "shardwise/strategy/model_manifest.hpp"

namespace shardwise::detail {

// A manifest ({"parameters": [...]}) or a Hugging Face config.json, as load_model_description
// reads them.
[[nodiscard]] ModelManifest model_description_of(const nlohmann::json& json);

}  // namespace shardwise::detail

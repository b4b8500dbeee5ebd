// A model's manifest from a .safetensors header (shardwise/core/safetensors.hpp reads it).
#include "shardwise/core/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/plan/model_shape.hpp"

namespace shardwise::plan {

ModelManifest manifest_from_safetensors_header(std::string_view header, std::uint64_t data_bytes) {
  const SafetensorsHeader parsed = parse_safetensors_header(header, data_bytes);
  if (parsed.tensors.size() > static_cast<std::size_t>(kMaxManifestParameters)) {
    throw ParseError("the safetensors header lists " + std::to_string(parsed.tensors.size()) +
                     " tensors; at most " + std::to_string(kMaxManifestParameters));
  }
  ModelManifest manifest;
  for (const SafetensorsTensor& tensor : parsed.tensors) {
    manifest.parameters.push_back({tensor.name, tensor.shape, tensor.dtype, std::nullopt});
  }
  return manifest;
}

}  // namespace shardwise::plan

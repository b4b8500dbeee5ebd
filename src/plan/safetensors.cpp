// The header of a .safetensors file: {"name": {"dtype": "BF16", "shape": [..], "data_offsets":
// [begin, end]}, ..., "__metadata__": {...}}, offsets relative to the data after the header.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "detail/json_reader.hpp"
#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/plan/model_shape.hpp"

namespace shardwise::plan {
namespace {

DType safetensors_dtype(const std::string& text, const std::string& tensor) {
  static const std::pair<const char*, DType> kTypes[] = {
      {"F64", DType::kF64}, {"F32", DType::kF32}, {"BF16", DType::kBF16},
      {"F16", DType::kF16}, {"I64", DType::kI64}, {"I32", DType::kI32},
      {"I8", DType::kI8},   {"U8", DType::kU8},   {"BOOL", DType::kBool}};
  for (const auto& [name, dtype] : kTypes) {
    if (text == name) return dtype;
  }
  throw ParseError("safetensors tensor '" + tensor + "' has dtype '" + text.substr(0, 40) +
                   "'; expected F64, F32, BF16, F16, I64, I32, I8, U8 or BOOL");
}

std::uint64_t unsigned_at(const nlohmann::json& value, const std::string& what) {
  if (!value.is_number_unsigned()) {
    throw ParseError(what + " is " + value.dump().substr(0, 40) +
                     "; expected a non-negative integer");
  }
  return value.get<std::uint64_t>();
}

}  // namespace

ModelManifest manifest_from_safetensors_header(std::string_view header, std::uint64_t data_bytes) {
  const nlohmann::json json = detail::parse_json(header, "the safetensors header");
  if (!json.is_object()) throw ParseError("the safetensors header is not a JSON object");
  if (json.size() > static_cast<std::size_t>(kMaxManifestParameters)) {
    throw ParseError("the safetensors header lists " + std::to_string(json.size()) +
                     " tensors; at most " + std::to_string(kMaxManifestParameters));
  }
  ModelManifest manifest;
  // Each tensor's bytes, [begin, end) in the data, with its index in the manifest.
  std::vector<std::tuple<std::uint64_t, std::uint64_t, std::size_t>> extents;
  for (const auto& [name, tensor] : json.items()) {
    if (name == "__metadata__") continue;
    const std::string what = "safetensors tensor '" + name.substr(0, 200) + "'";
    if (!tensor.is_object() || !tensor.contains("dtype") || !tensor.contains("shape") ||
        !tensor.contains("data_offsets") || tensor.size() != 3) {
      throw ParseError(what + " needs exactly \"dtype\", \"shape\" and \"data_offsets\"");
    }
    if (!tensor["dtype"].is_string()) throw ParseError(what + ": \"dtype\" is not a string");
    const DType dtype = safetensors_dtype(tensor["dtype"].get<std::string>(), name);
    if (!tensor["shape"].is_array() || tensor["shape"].size() > 16) {
      throw ParseError(what + ": \"shape\" is not a list of at most 16 sizes");
    }
    Shape shape;
    std::int64_t elements = 1;
    for (const nlohmann::json& size : tensor["shape"]) {
      const std::uint64_t value = unsigned_at(size, what + " shape entry");
      if (value > static_cast<std::uint64_t>(INT64_MAX)) {
        throw ParseError(what + " shape entry " + std::to_string(value) + " is too large");
      }
      shape.push_back(static_cast<std::int64_t>(value));
      elements = checked_multiply(elements, shape.back(), what + " elements");
    }
    const nlohmann::json& offsets = tensor["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      throw ParseError(what + ": \"data_offsets\" is not [begin, end]");
    }
    const std::uint64_t begin = unsigned_at(offsets[0], what + " data_offsets begin");
    const std::uint64_t end = unsigned_at(offsets[1], what + " data_offsets end");
    const std::int64_t bytes = checked_multiply(
        elements, static_cast<std::int64_t>(size_in_bytes(dtype)), what + " bytes");
    if (begin > end || end > data_bytes || end - begin != static_cast<std::uint64_t>(bytes)) {
      throw ParseError(what + " has data_offsets [" + std::to_string(begin) + ", " +
                       std::to_string(end) + "]; its shape needs " + std::to_string(bytes) +
                       " bytes inside the file's " + std::to_string(data_bytes) + " data bytes");
    }
    extents.emplace_back(begin, end, manifest.parameters.size());
    manifest.parameters.push_back({name, std::move(shape), dtype, std::nullopt});
  }
  if (manifest.parameters.empty()) throw ParseError("the safetensors header lists no tensors");
  // Two tensors sharing bytes would be read as one another's (the safetensors library refuses
  // such files too).
  std::sort(extents.begin(), extents.end());
  std::size_t reach = 0;  // the extent that reaches furthest so far
  for (std::size_t i = 1; i < extents.size(); ++i) {
    const auto& [begin, end, index] = extents[i];
    const auto& [far_begin, far_end, far] = extents[reach];
    if (begin < far_end && end > begin) {
      throw ParseError("safetensors tensors '" + manifest.parameters[far].name.substr(0, 200) +
                       "' [" + std::to_string(far_begin) + ", " + std::to_string(far_end) +
                       ") and '" + manifest.parameters[index].name.substr(0, 200) + "' [" +
                       std::to_string(begin) + ", " + std::to_string(end) + ") overlap");
    }
    if (end > far_end) reach = i;
  }
  return manifest;
}

}  // namespace shardwise::plan

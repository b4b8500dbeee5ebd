#include "shardwise/core/safetensors.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "detail/json_reader.hpp"
#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

constexpr std::pair<const char*, DType> kTypes[] = {
    {"F64", DType::kF64}, {"F32", DType::kF32}, {"BF16", DType::kBF16},
    {"F16", DType::kF16}, {"I64", DType::kI64}, {"I32", DType::kI32},
    {"I8", DType::kI8},   {"U8", DType::kU8},   {"BOOL", DType::kBool}};

std::uint64_t unsigned_at(const nlohmann::json& value, const std::string& what) {
  if (!value.is_number_unsigned()) {
    throw ParseError(what + " is " + echo_input(value.dump(), 40) +
                     "; expected a non-negative integer");
  }
  return value.get<std::uint64_t>();
}

}  // namespace

std::string safetensors_dtype_name(DType dtype) {
  for (const auto& [name, type] : kTypes) {
    if (type == dtype) return name;
  }
  throw InvalidArgument("safetensors has no name for the dtype " + to_string(dtype));
}

DType safetensors_dtype(std::string_view name, const std::string& what) {
  for (const auto& [text, dtype] : kTypes) {
    if (name == text) return dtype;
  }
  throw ParseError(what + " has dtype '" + echo_input(name, 40) +
                   "'; expected F64, F32, BF16, F16, I64, I32, I8, U8 or BOOL");
}

namespace {

SafetensorsHeader parse_unchecked(std::string_view header, std::uint64_t data_bytes) {
  if (header.size() > kMaxSafetensorsHeaderBytes) {
    throw ParseError("the safetensors header has " + std::to_string(header.size()) +
                     " bytes; at most " + std::to_string(kMaxSafetensorsHeaderBytes));
  }
  // Writers pad the header with spaces to an 8-byte boundary; JSON allows them.
  const nlohmann::json json = detail::parse_json(header, "the safetensors header");
  if (!json.is_object()) throw ParseError("the safetensors header is not a JSON object");
  if (json.size() > kMaxSafetensorsTensors) {
    throw ParseError("the safetensors header lists " + std::to_string(json.size()) +
                     " tensors; at most " + std::to_string(kMaxSafetensorsTensors));
  }
  SafetensorsHeader result;
  for (const auto& [name, tensor] : json.items()) {
    if (name == "__metadata__") {
      if (!tensor.is_object()) throw ParseError("the safetensors __metadata__ is not an object");
      for (const auto& [key, value] : tensor.items()) {
        if (!value.is_string()) {
          throw ParseError("safetensors __metadata__ '" + echo_input(key, 200) +
                           "' is not a string");
        }
        result.metadata.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    const std::string what = "safetensors tensor '" + echo_input(name, 200) + "'";
    if (!tensor.is_object() || !tensor.contains("dtype") || !tensor.contains("shape") ||
        !tensor.contains("data_offsets") || tensor.size() != 3) {
      throw ParseError(what + " needs exactly \"dtype\", \"shape\" and \"data_offsets\"");
    }
    if (!tensor["dtype"].is_string()) throw ParseError(what + ": \"dtype\" is not a string");
    SafetensorsTensor entry;
    entry.name = name;
    entry.dtype = safetensors_dtype(tensor["dtype"].get<std::string>(), what);
    if (!tensor["shape"].is_array() || tensor["shape"].size() > 16) {
      throw ParseError(what + ": \"shape\" is not a list of at most 16 sizes");
    }
    std::int64_t elements = 1;
    for (const nlohmann::json& size : tensor["shape"]) {
      const std::uint64_t value = unsigned_at(size, what + " shape entry");
      if (value > static_cast<std::uint64_t>(INT64_MAX)) {
        throw ParseError(what + " shape entry " + std::to_string(value) + " is too large");
      }
      entry.shape.push_back(static_cast<std::int64_t>(value));
      elements = checked_multiply(elements, entry.shape.back(), what + " elements");
    }
    const nlohmann::json& offsets = tensor["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      throw ParseError(what + ": \"data_offsets\" is not [begin, end]");
    }
    entry.begin = unsigned_at(offsets[0], what + " data_offsets begin");
    entry.end = unsigned_at(offsets[1], what + " data_offsets end");
    const std::int64_t bytes = checked_multiply(
        elements, static_cast<std::int64_t>(size_in_bytes(entry.dtype)), what + " bytes");
    if (entry.begin > entry.end || entry.end > data_bytes ||
        entry.end - entry.begin != static_cast<std::uint64_t>(bytes)) {
      throw ParseError(what + " has data_offsets [" + std::to_string(entry.begin) + ", " +
                       std::to_string(entry.end) + "]; its shape needs " + std::to_string(bytes) +
                       " bytes inside the file's " + std::to_string(data_bytes) + " data bytes");
    }
    result.tensors.push_back(std::move(entry));
  }
  if (result.tensors.empty()) throw ParseError("the safetensors header lists no tensors");
  // Two tensors sharing bytes would be read as one another's (the safetensors library refuses
  // such files too). Empty tensors share nothing.
  std::vector<std::tuple<std::uint64_t, std::uint64_t, std::size_t>> extents;
  for (std::size_t i = 0; i < result.tensors.size(); ++i) {
    if (result.tensors[i].end > result.tensors[i].begin) {
      extents.emplace_back(result.tensors[i].begin, result.tensors[i].end, i);
    }
  }
  std::sort(extents.begin(), extents.end());
  for (std::size_t i = 1; i < extents.size(); ++i) {
    const auto& [begin, end, index] = extents[i];
    const auto& [previous_begin, previous_end, previous] = extents[i - 1];
    if (begin < previous_end) {
      throw ParseError("safetensors tensors '" + echo_input(result.tensors[previous].name, 200) +
                       "' [" + std::to_string(previous_begin) + ", " +
                       std::to_string(previous_end) + ") and '" +
                       echo_input(result.tensors[index].name, 200) + "' [" + std::to_string(begin) +
                       ", " + std::to_string(end) + ") overlap");
    }
  }
  return result;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view header, std::uint64_t data_bytes) {
  try {
    return parse_unchecked(header, data_bytes);
  } catch (const ParseError&) {
    throw;
  } catch (const Error& e) {  // checked arithmetic's overflow, an InvalidArgument
    throw ParseError(e.what());
  }
}

}  // namespace shardwise

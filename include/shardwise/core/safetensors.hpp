#pragma once
// The header of a .safetensors file (Hugging Face's format for arrays): an 8-byte little-endian
// length, then that many bytes of JSON, {"name": {"dtype": "F32", "shape": [..], "data_offsets":
// [begin, end]}, ..., "__metadata__": {"key": "text", ...}}, then the data, each tensor's bytes
// at [begin, end) relative to the data's start, row-major.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise {

// safetensors' own bound on a header; a length prefix above it is refused before any reading.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
inline constexpr std::size_t kMaxSafetensorsTensors = 1'000'000;

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::uint64_t begin = 0;  // [begin, end) in the data
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;  // in the header's order of names
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Parses and checks a header whose file holds `data_bytes` bytes after it: valid UTF-8 JSON, no
// name twice, every tensor with exactly dtype, shape and data_offsets, a known dtype, offsets
// inside the data that hold exactly its shape's bytes (checked arithmetic), no two tensors
// sharing bytes, metadata of strings only. Throws ParseError naming the tensor and the value.
[[nodiscard]] SafetensorsHeader parse_safetensors_header(std::string_view header,
                                                         std::uint64_t data_bytes);

// "F32", "BF16", ... (InvalidArgument for a dtype safetensors has no name for).
[[nodiscard]] std::string safetensors_dtype_name(DType dtype);
// The dtype of a safetensors name (ParseError naming `what` otherwise).
[[nodiscard]] DType safetensors_dtype(std::string_view name, const std::string& what);

}  // namespace shardwise

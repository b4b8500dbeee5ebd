#pragma once
// Writing a whole .safetensors file (the format Hugging Face's libraries load): the header as
// safetensors writes it (8-byte little-endian length, JSON padded with spaces so that the data
// starts 8-byte aligned), then each tensor's bytes in order, with no gaps.

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise::ckpt {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::span<const std::byte> bytes;  // row-major, the shape's bytes exactly
};

// The length prefix and padded JSON header for `entries` in order.
[[nodiscard]] std::string safetensors_header_bytes(
    std::span<const SafetensorsEntry> entries,
    const std::vector<std::pair<std::string, std::string>>& metadata);

// Writes `path` atomically (a temporary file beside it, fsynced, then renamed). CheckpointError
// naming the file where it cannot; InvalidArgument where an entry's bytes do not fit its shape.
void write_safetensors_file(const std::filesystem::path& path,
                            std::span<const SafetensorsEntry> entries,
                            const std::vector<std::pair<std::string, std::string>>& metadata);

}  // namespace shardwise::ckpt

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

// What a writer may do with what is at its path: replace a regular file there (never a symlink,
// a FIFO or a folder, which are always refused), or refuse anything; `what` and `hint` frame
// the refusal ("--out '...' exists; it is left as it is" + hint).
struct OutputPolicy {
  bool replace_file = false;
  std::string what = "output";
  std::string hint;
};

// Writes `path` atomically (a new file beside it, created without following any symlink,
// fsynced, then renamed into place). FileError naming the file where it cannot or may not;
// InvalidArgument where an entry's bytes do not fit its shape.
void write_safetensors_file(const std::filesystem::path& path,
                            std::span<const SafetensorsEntry> entries,
                            const std::vector<std::pair<std::string, std::string>>& metadata,
                            const OutputPolicy& policy = {});

}  // namespace shardwise::ckpt

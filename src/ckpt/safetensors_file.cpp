#include "shardwise/ckpt/safetensors_file.hpp"

#include <fcntl.h>

#include <nlohmann/json.hpp>
#include <system_error>

#include "detail/output_file.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/safetensors.hpp"

namespace shardwise::ckpt {

std::string safetensors_header_bytes(
    std::span<const SafetensorsEntry> entries,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const SafetensorsEntry& entry : entries) {
    const std::uint64_t bytes =
        static_cast<std::uint64_t>(num_elements(entry.shape)) * size_in_bytes(entry.dtype);
    if (entry.bytes.size() != bytes) {
      throw InvalidArgument("safetensors tensor '" + echo_input(entry.name, 200) + "' has " +
                            std::to_string(entry.bytes.size()) + " bytes; its shape " +
                            to_string(entry.shape) + " holds " + std::to_string(bytes));
    }
    header[entry.name] = {{"dtype", safetensors_dtype_name(entry.dtype)},
                          {"shape", entry.shape},
                          {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = meta;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  std::string prefix(8, '\0');
  for (std::size_t b = 0; b < 8; ++b) {
    prefix[b] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * b)) & 0xFFU);
  }
  return prefix + text;
}

void write_safetensors_file(const std::filesystem::path& path,
                            std::span<const SafetensorsEntry> entries,
                            const std::vector<std::pair<std::string, std::string>>& metadata,
                            const OutputPolicy& policy) {
  const std::string header = safetensors_header_bytes(entries, metadata);
  shardwise::detail::OutputFile file(path,
                                     policy.replace_file ? shardwise::detail::IfExists::kReplaceFile
                                                         : shardwise::detail::IfExists::kRefuse,
                                     policy.what, policy.hint);
  file.write(header);
  for (const SafetensorsEntry& entry : entries) file.write(entry.bytes.data(), entry.bytes.size());
  file.commit();
}

}  // namespace shardwise::ckpt

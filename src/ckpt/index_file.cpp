#include "index_file.hpp"

#include <fcntl.h>

#include "detail/file_io.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"

namespace shardwise::ckpt::detail {

std::string read_index_text(const std::filesystem::path& folder) {
  using shardwise::detail::path_kind;
  using shardwise::detail::PathKind;
  const std::filesystem::path path = folder / kIndexFileName;
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) {
    throw CheckpointError("'" + echo_input(folder.string(), 200) + "' is not a folder");
  }
  if (path_kind(path) == PathKind::kAbsent) {
    throw CheckpointError("'" + echo_input(folder.string(), 200) +
                          "' is not a checkpoint: it has no " + kIndexFileName +
                          " (an interrupted save never has one)");
  }
  shardwise::detail::File file(path, O_RDONLY | O_NOFOLLOW);
  const std::uint64_t size = file.size();
  if (size > kMaxIndexBytes) {
    throw CheckpointError("'" + echo_input(path.string(), 200) + "' has " + std::to_string(size) +
                          " bytes; at most " + std::to_string(kMaxIndexBytes));
  }
  std::string text(size, '\0');
  file.read_at(text.data(), size, 0);
  return text;
}

CheckpointIndex read_index_file(const std::filesystem::path& folder, const std::string& what) {
  return parse_checkpoint_index(read_index_text(folder), what);
}

}  // namespace shardwise::ckpt::detail

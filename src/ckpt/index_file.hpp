#pragma once
// A checkpoint folder's index.json read from disk: a regular file of the folder (never a
// symlink, a FIFO or a device), at most kMaxIndexBytes.

#include <filesystem>
#include <string>

#include "shardwise/ckpt/checkpoint_index.hpp"

namespace shardwise::ckpt::detail {

// CheckpointError where `folder` is no folder or holds no index; FileError where it cannot be
// read.
[[nodiscard]] std::string read_index_text(const std::filesystem::path& folder);

// read_index_text, parsed; `what` names it in errors.
[[nodiscard]] CheckpointIndex read_index_file(const std::filesystem::path& folder,
                                              const std::string& what);

}  // namespace shardwise::ckpt::detail

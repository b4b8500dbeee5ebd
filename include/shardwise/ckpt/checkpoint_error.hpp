#pragma once

#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::ckpt {

// A checkpoint that cannot be written (a full disk, a folder that cannot be made) or read (a
// missing file, a checksum that does not match, an index that contradicts itself, an array the
// loader wants and the checkpoint lacks). The message names the file, the array and the value.
// A FileError: what cannot be opened, read or written at all is one of those (FileError
// itself, from the file steps every layer shares).
class CheckpointError : public FileError {
 public:
  explicit CheckpointError(const std::string& message) : FileError(message) {}
};

}  // namespace shardwise::ckpt

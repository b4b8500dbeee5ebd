#pragma once

#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::ckpt {

// A checkpoint that cannot be written (a full disk, a folder that cannot be made) or read (a
// missing file, a checksum that does not match, an index that contradicts itself, an array the
// loader wants and the checkpoint lacks). The message names the file, the array and the value.
class CheckpointError : public Error {
 public:
  explicit CheckpointError(const std::string& message) : Error(message) {}
};

}  // namespace shardwise::ckpt

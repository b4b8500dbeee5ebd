#pragma once
// How a checkpoint names its data files and the tensors in them.

#include <cstdio>
#include <string>

#include "shardwise/core/shape.hpp"

namespace shardwise::ckpt::detail {

// "rank-00003.safetensors"
inline std::string shard_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.safetensors", rank);
  return name;
}

// "model/transformer.wte.weight[0:128,0:64]"
inline std::string shard_name(const std::string& array, const ShardIndex& box) {
  std::string text = array + "[";
  for (std::size_t d = 0; d < box.size(); ++d) {
    text += (d > 0 ? "," : "") + std::to_string(box[d].start) + ":" + std::to_string(box[d].stop);
  }
  return text + "]";
}

}  // namespace shardwise::ckpt::detail

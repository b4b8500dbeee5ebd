#pragma once
// What a training run's state is, as a checkpoint sees it: for every parameter three global
// arrays, its values and AdamW's two moments, each rank holding blocks of them (a tensor-parallel
// block, cut further by ZeRO), plus the count of steps done (which fixes the learning rate and
// the next batch).

#include <cstdint>
#include <string>

#include "shardwise/core/shape.hpp"

namespace shardwise::train {

// The arrays of parameter `name`: "model/NAME", "optimizer/exp_avg/NAME",
// "optimizer/exp_avg_sq/NAME".
[[nodiscard]] std::string model_array(const std::string& name);
[[nodiscard]] std::string exp_avg_array(const std::string& name);
[[nodiscard]] std::string exp_avg_sq_array(const std::string& name);

// One of this rank's blocks of the state: float32 elements of `box` of the whole array
// `shape`, row-major at `data`.
struct StateBlock {
  std::string array;
  Shape shape;
  ShardIndex box;
  std::string sharding;  // how the run lays it out, in words
  float* data = nullptr;
  // False for a second copy of a parameter another block already saves (a tied embedding on
  // the last pipeline stage): loaded, not saved.
  bool saved = true;
  // Optimizer state rather than the model's values.
  bool optimizer = false;
};

}  // namespace shardwise::train

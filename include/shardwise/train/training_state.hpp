#pragma once
// What a training run's state is, as a checkpoint sees it: for every parameter three global
// arrays, its values and AdamW's two moments, each rank holding blocks of them (a tensor-parallel
// block, cut further by ZeRO), plus the count of steps done (which fixes the learning rate and
// the next batch).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/element_type.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise::train {

// The arrays of parameter `name`: "model/NAME", "optimizer/exp_avg/NAME",
// "optimizer/exp_avg_sq/NAME".
[[nodiscard]] std::string model_array(const std::string& name);
[[nodiscard]] std::string exp_avg_array(const std::string& name);
[[nodiscard]] std::string exp_avg_sq_array(const std::string& name);
// The prefix of a Mixture of Experts' expert bias arrays ("expert_bias/layers.L", experts
// floats each: Model::state_arrays).
inline constexpr const char* kExpertBiasArrays = "expert_bias/";

// One of this rank's blocks of the state: the elements of `box` of the whole array `shape`, of
// type `dtype`, row-major at `data`.
struct StateBlock {
  std::string array;
  Shape shape;
  ShardIndex box;
  std::string sharding;  // how the run lays it out, in words
  DType dtype = DType::kF32;
  std::byte* data = nullptr;
  // False for a second copy of a parameter another block already saves (a tied embedding on
  // the last pipeline stage): loaded, not saved.
  bool saved = true;
  // Optimizer state rather than the model's values.
  bool optimizer = false;
  // The model's state beyond its parameters (Model::state_arrays): loaded where the checkpoint
  // holds it, else kept as it is.
  bool model_state = false;

  [[nodiscard]] std::size_t elements() const {
    return static_cast<std::size_t>(num_elements(shape_of(box)));
  }
  [[nodiscard]] std::span<std::byte> bytes() const {
    return {data, elements() * size_in_bytes(dtype)};
  }
  // The elements as T; InvalidArgument where the block's dtype is another.
  template <typename T>
  [[nodiscard]] std::span<T> as() const {
    if (dtype_of<T>() != dtype) wrong_type(dtype_of<T>());
    return {reinterpret_cast<T*>(data), elements()};
  }

 private:
  [[noreturn]] void wrong_type(DType wanted) const;
};

}  // namespace shardwise::train

#pragma once
// Reading a Hugging Face file's floating-point tensors as float32, for every family's adapter.

#include <string>
#include <vector>

#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise::models::detail {

// The elements of `hf_box` of the file's tensor `hf_name` (F32, F64, F16 or BF16) as floats.
[[nodiscard]] std::vector<float> read_hf_floats(const ckpt::CheckpointReader& file,
                                                const std::string& hf_name,
                                                const ShardIndex& hf_box);

// CheckpointError naming the tensor where the file lacks it, holds it in another shape than
// `expected` (`layout` says whose: "GPT-2's layout of h.0.attn.c_attn.weight (3, 8, 8)") or
// of a dtype that is not read.
void check_hf_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                     const Shape& expected, const std::string& layout);

}  // namespace shardwise::models::detail

#pragma once
// Causal multi-head self-attention over packed q, k, v, as GPT-2 computes it. `qkv` is
// (batch, seq, 3 channels): q, k and v of every head side by side; `out` is (batch, seq,
// channels); `att` keeps the softmax weights (batch, heads, seq, seq) for backward (entries
// above the diagonal are zero). Backward adds into dqkv.

#include <cstddef>

namespace shardwise::kernels {

void attention_forward(float* out, float* att, const float* qkv, std::size_t batch, std::size_t seq,
                       std::size_t channels, std::size_t heads);

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        std::size_t batch, std::size_t seq, std::size_t channels,
                        std::size_t heads);

}  // namespace shardwise::kernels

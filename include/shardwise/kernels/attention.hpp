#pragma once
// Causal multi-head self-attention over packed q, k, v, as GPT-2 computes it, FlashAttention-2's
// way: tiles of queries against tiles of keys with an online softmax, never the seq x seq
// matrix. `qkv` is (batch, seq, 3 channels): q, k and v of every head side by side; `out` is
// (batch, seq, channels); `lse` keeps each row's log-sum-exp of its scaled scores (batch, heads,
// seq), all backward needs besides q, k, v and out, which recomputes the weights tile by tile.
// Tiles above the diagonal are skipped. Each (sequence, head) runs on one thread, in a fixed
// order: results do not depend on the thread count. Backward adds into dqkv, or writes it
// (InputGradient::kOverwrite: each tile's first product sets its block, nothing is zeroed).

#include <cstddef>

#include "shardwise/kernels/input_gradient.hpp"

namespace shardwise::kernels {

void attention_forward(float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq,
                       std::size_t channels, std::size_t heads);

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, std::size_t batch, std::size_t seq, std::size_t channels,
                        std::size_t heads, InputGradient mode = InputGradient::kAccumulate);

}  // namespace shardwise::kernels

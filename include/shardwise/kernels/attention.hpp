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

// Grouped-query attention (Ainslie et al. 2023) as Llama computes it: `heads` query heads share
// `kv_heads` heads of keys and values, query head h reading key/value head h / (heads /
// kv_heads); the shared heads are read where they lie, never repeated. q is (batch, seq, heads
// head_size) with `q_stride` floats between positions, k and v (batch, seq, kv_heads head_size)
// with `kv_stride`; out is dense (batch, seq, heads head_size); lse (batch, heads, seq). heads
// must be a multiple of kv_heads.
struct AttentionLayout {
  std::size_t batch = 0;
  std::size_t seq = 0;
  std::size_t heads = 0;
  std::size_t kv_heads = 0;
  std::size_t head_size = 0;
  std::size_t q_stride = 0;
  std::size_t kv_stride = 0;
  // bf16 mixed precision, as PyTorch's attention on bf16 tensors: q, k and v must hold bf16
  // roundings, and the tiles' other operands (the softmax's weights, the output's gradient, the
  // scores' gradient) are rounded to bf16 before their products, which sum in float32; the
  // softmax, the outputs and the gradients stay float32. AMX's tiles run the products where this
  // machine has them and bf16 units are in use (bf16_matmul.hpp); elsewhere the float32 products
  // run on the same roundings.
  bool bf16 = false;
};

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionLayout& layout);
// Backward runs one (sequence, key/value head) per thread, its query heads in order: dk and dv
// of a shared head are summed in a fixed order. With kOverwrite dq, dk and dv are written.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const AttentionLayout& layout,
                        InputGradient mode = InputGradient::kAccumulate);

// GPT-2's packed q, k, v (every head its own keys and values):

void attention_forward(float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq,
                       std::size_t channels, std::size_t heads);

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, std::size_t batch, std::size_t seq, std::size_t channels,
                        std::size_t heads, InputGradient mode = InputGradient::kAccumulate);

}  // namespace shardwise::kernels

#pragma once
// GPT-2's input: the token embedding of each token plus the learned embedding of its position.
// `tokens` is (batch, seq); `wte` is (vocab, channels), `wpe` (max positions, channels); `out`
// is (batch, seq, channels). Tokens are checked by the caller. Backward adds into the tables.
// A bf16 token table (bf16 mixed precision's copy) is widened row by row as it is read.

#include <cstddef>
#include <cstdint>

#include "shardwise/core/half.hpp"

namespace shardwise::kernels {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::size_t batch, std::size_t seq, std::size_t channels);
void embedding_forward(float* out, const std::int32_t* tokens, const BFloat16* wte,
                       const float* wpe, std::size_t batch, std::size_t seq, std::size_t channels);
// out (channels) = row `row` of a table (channels wide), widened where it is bf16.
void copy_row(float* out, const float* table, std::size_t row, std::size_t channels);
void copy_row(float* out, const BFloat16* table, std::size_t row, std::size_t channels);

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        std::size_t batch, std::size_t seq, std::size_t channels);

}  // namespace shardwise::kernels

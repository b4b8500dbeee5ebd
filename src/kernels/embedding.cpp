#include "shardwise/kernels/embedding.hpp"

#include <algorithm>

#include "parallel.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"

namespace shardwise::kernels {
namespace {

template <typename Table>
void add_positions(float* out, const std::int32_t* tokens, const Table* wte, const float* wpe,
                   std::size_t batch, std::size_t seq, std::size_t channels) {
  detail::parallel_for(batch * seq, 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      float* y = out + i * channels;
      copy_row(y, wte, static_cast<std::size_t>(tokens[i]), channels);
      const float* position = wpe + (i % seq) * channels;
      for (std::size_t c = 0; c < channels; ++c) y[c] += position[c];
    }
  });
}

}  // namespace

void copy_row(float* out, const float* table, std::size_t row, std::size_t channels) {
  const float* from = table + row * channels;
  std::copy(from, from + channels, out);
}

void copy_row(float* out, const BFloat16* table, std::size_t row, std::size_t channels) {
  to_float({table + row * channels, channels}, {out, channels});
}

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::size_t batch, std::size_t seq, std::size_t channels) {
  add_positions(out, tokens, wte, wpe, batch, seq, channels);
}

void embedding_forward(float* out, const std::int32_t* tokens, const BFloat16* wte,
                       const float* wpe, std::size_t batch, std::size_t seq, std::size_t channels) {
  add_positions(out, tokens, wte, wpe, batch, seq, channels);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        std::size_t batch, std::size_t seq, std::size_t channels) {
  // Column by column: tokens repeat, so rows of dwte are shared, but a column is one thread's.
  detail::parallel_for(channels, 32, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = 0; i < batch * seq; ++i) {
      const float* dy = dout + i * channels;
      float* dtoken = dwte + static_cast<std::size_t>(tokens[i]) * channels;
      float* dposition = dwpe + (i % seq) * channels;
      for (std::size_t c = first; c < last; ++c) {
        dtoken[c] += dy[c];
        dposition[c] += dy[c];
      }
    }
  });
}

}  // namespace shardwise::kernels

#include "shardwise/kernels/embedding.hpp"

#include "parallel.hpp"

namespace shardwise::kernels {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::size_t batch, std::size_t seq, std::size_t channels) {
  detail::parallel_for(batch * seq, 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      const float* token = wte + static_cast<std::size_t>(tokens[i]) * channels;
      const float* position = wpe + (i % seq) * channels;
      float* y = out + i * channels;
      for (std::size_t c = 0; c < channels; ++c) y[c] = token[c] + position[c];
    }
  });
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

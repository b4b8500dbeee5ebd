#include "shardwise/kernels/embedding.hpp"

namespace shardwise::kernels {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::size_t batch, std::size_t seq, std::size_t channels) {
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < seq; ++t) {
      const float* token = wte + static_cast<std::size_t>(tokens[b * seq + t]) * channels;
      const float* position = wpe + t * channels;
      float* y = out + (b * seq + t) * channels;
      for (std::size_t c = 0; c < channels; ++c) y[c] = token[c] + position[c];
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        std::size_t batch, std::size_t seq, std::size_t channels) {
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < seq; ++t) {
      const float* dy = dout + (b * seq + t) * channels;
      float* dtoken = dwte + static_cast<std::size_t>(tokens[b * seq + t]) * channels;
      float* dposition = dwpe + t * channels;
      for (std::size_t c = 0; c < channels; ++c) {
        dtoken[c] += dy[c];
        dposition[c] += dy[c];
      }
    }
  }
}

}  // namespace shardwise::kernels

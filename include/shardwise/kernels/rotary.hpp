#pragma once
// Rotary position embeddings (Su et al. 2021) in Hugging Face's layout: each head's vector x of
// `head_size` (even) is rotated as x cos + rotate_half(x) sin, rotate_half(x) = (-x[d/2:],
// x[:d/2]), pair i (x[i], x[i + d/2]) by the angle position * inv_freq[i]. The table holds cos
// and sin of every position and pair; backward applies the inverse rotation.

#include <cstddef>
#include <vector>

namespace shardwise::kernels {

// inv_freq[i] = theta^(-2i / head_size), i < head_size / 2, with Llama 3's scaling where
// `factor` is set (rope_scaling of type "llama3": wavelengths past original_context /
// low_freq_factor divided by factor, those under original_context / high_freq_factor kept, the
// ones between interpolated smoothly), as transformers computes it.
struct RotaryScaling {
  double factor = 0;  // 0: none
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  double original_context = 8192;
};
[[nodiscard]] std::vector<float> rotary_frequencies(std::size_t head_size, double theta,
                                                    const RotaryScaling& scaling = {});

class RotaryTable {
 public:
  RotaryTable() = default;
  // cos and sin of positions [0, positions) at `frequencies` (head_size / 2 of them).
  RotaryTable(const std::vector<float>& frequencies, std::size_t positions);
  [[nodiscard]] std::size_t positions() const { return positions_; }
  [[nodiscard]] std::size_t pairs() const { return pairs_; }

  // Rotates, in place, `heads` heads of every row of x (batch * seq rows, `stride` floats apart,
  // row b seq + t at position t). InvalidArgument where seq exceeds the table.
  void rotate(float* x, std::size_t batch, std::size_t seq, std::size_t heads,
              std::size_t stride) const;
  // Rotates, in place, `heads` heads of `rows` rows of one sequence (`stride` floats apart), row
  // i at position first_position + i: a decoder's new positions after those it has cached.
  // InvalidArgument where the last position is outside the table.
  void rotate_positions(float* x, std::size_t first_position, std::size_t rows, std::size_t heads,
                        std::size_t stride) const;
  // The rotation's transpose: the gradient of rotate's input from its output's, in place.
  void rotate_back(float* dx, std::size_t batch, std::size_t seq, std::size_t heads,
                   std::size_t stride) const;

 private:
  void apply(float* x, std::size_t batch, std::size_t seq, std::size_t heads, std::size_t stride,
             float sign) const;
  void rotate_row(float* row, std::size_t position, std::size_t heads, float sign) const;
  std::size_t positions_ = 0;
  std::size_t pairs_ = 0;
  std::vector<float> cos_, sin_;  // positions x pairs
};

}  // namespace shardwise::kernels

#include "shardwise/kernels/rotary.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "parallel.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::kernels {

std::vector<float> rotary_frequencies(std::size_t head_size, double theta,
                                      const RotaryScaling& scaling) {
  std::vector<float> frequencies(head_size / 2);
  for (std::size_t i = 0; i < frequencies.size(); ++i) {
    // transformers: 1 / theta ** (arange(0, d, 2).float() / d), in float32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_size);
    frequencies[i] = 1.0F / std::pow(static_cast<float>(theta), exponent);
  }
  if (scaling.factor <= 0) return frequencies;
  const double low_wavelength = scaling.original_context / scaling.low_freq_factor;
  const double high_wavelength = scaling.original_context / scaling.high_freq_factor;
  for (float& f : frequencies) {
    const double wavelength = 2 * std::numbers::pi / f;
    if (wavelength > low_wavelength) {
      f = static_cast<float>(f / scaling.factor);
    } else if (wavelength >= high_wavelength) {
      const double smooth = (scaling.original_context / wavelength - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      f = static_cast<float>((1 - smooth) * f / scaling.factor + smooth * f);
    }
  }
  return frequencies;
}

RotaryTable::RotaryTable(const std::vector<float>& frequencies, std::size_t positions)
    : positions_(positions), pairs_(frequencies.size()) {
  cos_.resize(positions * pairs_);
  sin_.resize(positions * pairs_);
  for (std::size_t t = 0; t < positions; ++t) {
    for (std::size_t i = 0; i < pairs_; ++i) {
      // transformers multiplies in float32, then takes cos and sin of the float angle.
      const float angle = static_cast<float>(t) * frequencies[i];
      cos_[t * pairs_ + i] = std::cos(angle);
      sin_[t * pairs_ + i] = std::sin(angle);
    }
  }
}

void RotaryTable::rotate(float* x, std::size_t batch, std::size_t seq, std::size_t heads,
                         std::size_t stride) const {
  apply(x, batch, seq, heads, stride, 1.0F);
}

void RotaryTable::rotate_back(float* dx, std::size_t batch, std::size_t seq, std::size_t heads,
                              std::size_t stride) const {
  apply(dx, batch, seq, heads, stride, -1.0F);
}

void RotaryTable::apply(float* x, std::size_t batch, std::size_t seq, std::size_t heads,
                        std::size_t stride, float sign) const {
  if (seq > positions_) {
    throw InvalidArgument("rotary embeddings for " + std::to_string(seq) +
                          " positions; the table holds " + std::to_string(positions_));
  }
  detail::parallel_for(batch * seq, 16, [&](std::size_t first, std::size_t last) {
    for (std::size_t row = first; row < last; ++row) {
      rotate_row(x + row * stride, row % seq, heads, sign);
    }
  });
}

void RotaryTable::rotate_positions(float* x, std::size_t first_position, std::size_t rows,
                                   std::size_t heads, std::size_t stride) const {
  if (first_position > positions_ || rows > positions_ - first_position) {
    throw InvalidArgument("rotary embeddings for positions [" + std::to_string(first_position) +
                          ", " + std::to_string(first_position + rows) + "); the table holds " +
                          std::to_string(positions_));
  }
  for (std::size_t i = 0; i < rows; ++i) rotate_row(x + i * stride, first_position + i, heads, 1);
}

void RotaryTable::rotate_row(float* row, std::size_t position, std::size_t heads,
                             float sign) const {
  const std::size_t half = pairs_;
  const float* c = cos_.data() + position * half;
  const float* s = sin_.data() + position * half;
  for (std::size_t h = 0; h < heads; ++h) {
    float* v = row + h * 2 * half;
    for (std::size_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half], si = sign * s[i];
      v[i] = a * c[i] - b * si;
      v[i + half] = b * c[i] + a * si;
    }
  }
}

}  // namespace shardwise::kernels

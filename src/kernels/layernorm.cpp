#include "shardwise/kernels/layernorm.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fast_math.hpp"
#include "lane_vector.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

// Fewer rows than this per thread cost more to hand out than they save; also the rows of one
// block of the weight's and bias's partial sums in backward.
constexpr std::size_t kRowsPerThread = 64;

using detail::kLanes;
using detail::LaneVector;
using detail::load_first_lanes;
using detail::load_lanes;
using detail::splat_lanes;
using detail::store_lanes;
using detail::sum_lanes;

// One row: normalised into y; its mean and reciprocal standard deviation returned in m and s.
// Where `add` is given, x is first made x + add, written back through `sum_out` (the residual
// add fused with the LayerNorm that reads it: one pass over the stream instead of two).
SHARDWISE_CPU_CLONES
void norm_row(float* __restrict y, float* __restrict sum_out, const float* __restrict x,
              const float* __restrict add, const float* __restrict weight,
              const float* __restrict bias, std::size_t channels, float& m, float& s) {
  const std::size_t whole = channels - channels % kLanes;
  const float* in = x;
  if (add != nullptr) {
    for (std::size_t c = 0; c < channels; ++c) sum_out[c] = x[c] + add[c];
    in = sum_out;
  }
  LaneVector sums{};
  for (std::size_t c = 0; c < whole; c += kLanes) sums += load_lanes(in + c);
  sums += load_first_lanes(in + whole, channels - whole, 0.0F);
  const auto n = static_cast<float>(channels);
  m = sum_lanes(sums) / n;
  const LaneVector mean = splat_lanes(m);
  LaneVector square_sums{};
  for (std::size_t c = 0; c < whole; c += kLanes) {
    const LaneVector d = load_lanes(in + c) - mean;
    square_sums += d * d;
  }
  const LaneVector tail = load_first_lanes(in + whole, channels - whole, m) - mean;
  square_sums += tail * tail;
  s = 1.0F / std::sqrt(sum_lanes(square_sums) / n + kLayerNormEps);
  for (std::size_t c = 0; c < channels; ++c) y[c] = (in[c] - m) * s * weight[c] + bias[c];
}

// One row of the input gradient: dx (+)= (w dy - mean(w dy) - norm mean(w dy norm)) s; and,
// in the same pass over the row, its terms of the weight's and bias's gradients added to the
// row's block's partial sums (norm dy and dy).
SHARDWISE_CPU_CLONES
void norm_row_backward(float* __restrict dx, float* __restrict dweight_partial,
                       float* __restrict dbias_partial, const float* __restrict dy,
                       const float* __restrict x, const float* __restrict weight, float m, float s,
                       std::size_t channels) {
  const std::size_t whole = channels - channels % kLanes;
  const LaneVector mean = splat_lanes(m), scale = splat_lanes(s);
  LaneVector dnorm_sums{}, dnorm_norm_sums{};
  for (std::size_t c = 0; c < whole; c += kLanes) {
    const LaneVector norm = (load_lanes(x + c) - mean) * scale;
    const LaneVector dnorm = load_lanes(weight + c) * load_lanes(dy + c);
    dnorm_sums += dnorm;
    dnorm_norm_sums += dnorm * norm;
  }
  const std::size_t rest = channels - whole;
  const LaneVector tail_norm = (load_first_lanes(x + whole, rest, m) - mean) * scale;
  const LaneVector tail_dnorm =
      load_first_lanes(weight + whole, rest, 0.0F) * load_first_lanes(dy + whole, rest, 0.0F);
  dnorm_sums += tail_dnorm;
  dnorm_norm_sums += tail_dnorm * tail_norm;
  const auto n = static_cast<float>(channels);
  const float dnorm_mean = sum_lanes(dnorm_sums) / n;
  const float dnorm_norm_mean = sum_lanes(dnorm_norm_sums) / n;
  for (std::size_t c = 0; c < channels; ++c) {
    const float norm = (x[c] - m) * s;
    dx[c] += (weight[c] * dy[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
    dweight_partial[c] += norm * dy[c];
    dbias_partial[c] += dy[c];
  }
}

// One block's partial sums added to the weight's and bias's gradients (partial: the block's
// dweight terms, then its dbias terms).
SHARDWISE_CPU_CLONES
void add_partials(float* __restrict dweight, float* __restrict dbias,
                  const float* __restrict partial, std::size_t channels) {
  for (std::size_t c = 0; c < channels; ++c) {
    dweight[c] += partial[c];
    dbias[c] += partial[channels + c];
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::size_t rows, std::size_t channels) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      norm_row(out + r * channels, nullptr, inp + r * channels, nullptr, weight, bias, channels,
               mean[r], rstd[r]);
    }
  });
}

void residual_layernorm_forward(float* sum, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias,
                                std::size_t rows, std::size_t channels) {
  detail::parallel_for(rows, kRowsPerThread, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const std::size_t at = r * channels;
      norm_row(out + at, sum + at, a + at, b + at, weight, bias, channels, mean[r], rstd[r]);
    }
  });
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::size_t rows, std::size_t channels) {
  // The input's gradient row by row. The weight's and bias's gradients in the same pass: each
  // block of kRowsPerThread rows sums its rows' terms in row order into partial sums of its own,
  // and the blocks' partial sums are added in block order. The blocks do not depend on the
  // thread count, so neither do the sums; and dy and x are read once, not again column by
  // column (that second pass was 2% of tiny's step).
  const std::size_t blocks = (rows + kRowsPerThread - 1) / kRowsPerThread;
  std::vector<float> partial(blocks * 2 * channels, 0.0F);
  detail::parallel_for(blocks, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t b = first; b < last; ++b) {
      float* dweight_partial = partial.data() + b * 2 * channels;
      float* dbias_partial = dweight_partial + channels;
      for (std::size_t r = b * kRowsPerThread; r < std::min(rows, (b + 1) * kRowsPerThread); ++r) {
        const std::size_t at = r * channels;
        norm_row_backward(dinp + at, dweight_partial, dbias_partial, dout + at, inp + at, weight,
                          mean[r], rstd[r], channels);
      }
    }
  });
  for (std::size_t b = 0; b < blocks; ++b) {
    add_partials(dweight, dbias, partial.data() + b * 2 * channels, channels);
  }
}

}  // namespace shardwise::kernels

#include "shardwise/kernels/bf16_matmul.hpp"

#include <dnnl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bf16_bits.hpp"
#include "bias_rows.hpp"
#include "fast_math.hpp"
#include "gemm.hpp"
#include "lane_vector.hpp"
#include "parallel.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::kernels {
namespace {

// The widened operands a thread keeps between calls, at most (16 MiB).
constexpr std::size_t kKeptWidenedFloats = std::size_t{4} << 20;

// Whether the products use the units: kUnitsByDefault, or as a test set it.
constexpr int kUnitsByDefault = -1;
std::atomic<int> units_setting{kUnitsByDefault};

bool has_units() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

bool units_faster() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if (isa == dnnl_cpu_isa_avx512_core_amx) return true;
#if defined(__x86_64__) && defined(__GNUC__)
  return isa == dnnl_cpu_isa_avx512_core_bf16 && __builtin_cpu_is("amd");
#else
  return false;
#endif
}

bool units_in_use() {
  const int setting = units_setting.load(std::memory_order_relaxed);
  return has_units() && (setting == kUnitsByDefault ? units_faster() : setting == 1);
}

// A row-major operand: logical rows x cols, stored transposed or not with leading dimension ld.
struct Operand {
  bool trans;
  std::size_t rows, cols, ld;
};

dnnl::memory::desc desc_of(const Operand& o, dnnl::memory::data_type type) {
  const auto d = [](std::size_t v) { return static_cast<dnnl::memory::dim>(v); };
  return {{d(o.rows), d(o.cols)},
          type,
          o.trans ? dnnl::memory::dims{1, d(o.ld)} : dnnl::memory::dims{d(o.ld), 1}};
}

// A thread's matmul primitives by shape, strides and accumulation: built once, run every step.
using Key = std::tuple<bool, bool, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,
                       std::size_t, bool>;
struct Product {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c;
};
struct Cache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Product> products;
};
Cache& cache() {
  thread_local Cache c;
  return c;
}
constexpr std::size_t kMostCachedProducts = 256;

// shardwise::to_bfloat16's rounding (to nearest, ties to even; NaN stays a quiet NaN), inlined
// (bf16_bits.hpp) so that the loop vectorises, compiled for each vector width (fast_math.hpp).
SHARDWISE_CPU_CLONES
void round_range(const float* __restrict from, BFloat16* __restrict to, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    to[i].bits = detail::bf16_bits(from[i]);
  }
}

// Each value's rounding, as a float's bits (a quiet NaN for a NaN).
inline std::uint32_t rounded_bits(std::uint32_t bits) {
  const std::uint32_t rounded = (bits + 0x7FFFU + ((bits >> 16) & 1U)) & 0xFFFF0000U;
  const std::uint32_t quiet_nan = (bits | 0x400000U) & 0xFFFF0000U;
  return (bits & 0x7FFFFFFFU) > 0x7F800000U ? quiet_nan : rounded;
}

SHARDWISE_CPU_CLONES
void round_in_place(float* __restrict values, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, values + i, sizeof bits);
    const std::uint32_t result = rounded_bits(bits);
    std::memcpy(values + i, &result, sizeof result);
  }
}

SHARDWISE_CPU_CLONES
void round_in_place_and_keep(float* __restrict values, BFloat16* __restrict kept,
                             std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, values + i, sizeof bits);
    const std::uint32_t result = rounded_bits(bits);
    std::memcpy(values + i, &result, sizeof result);
    kept[i].bits = static_cast<std::uint16_t>(result >> 16);
  }
}

SHARDWISE_CPU_CLONES
void widen_range(const BFloat16* __restrict from, float* __restrict to, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(from[i].bits) << 16;
    std::memcpy(to + i, &bits, sizeof bits);
  }
}

// dbias[first, last) += the column sums of bf16 `dout` (rows x columns), row by row: cloned so
// that each row's slice widens and adds in vectors (a bias's gradient is summed over every
// token of the micro-batch).
SHARDWISE_CPU_CLONES
void add_column_sums(float* __restrict dbias, const BFloat16* __restrict dout, std::size_t rows,
                     std::size_t columns, std::size_t first, std::size_t last) {
  for (std::size_t r = 0; r < rows; ++r) {
    const BFloat16* row = dout + r * columns;
    for (std::size_t o = first; o < last; ++o) {
      const std::uint32_t bits = static_cast<std::uint32_t>(row[o].bits) << 16;
      float value = 0;
      std::memcpy(&value, &bits, sizeof value);
      dbias[o] += value;
    }
  }
}

// The few-row product (decoding's): out (rows x n) (+)= inp (rows x k) W^T, each output the dot
// product of an input row with a weight row, summed in float32 lanes. It reads each bf16 weight
// once, half of float32's bytes, where a matrix product would first repack the weight into its
// own layout and read it again. 32 weights are one 64-byte load: as 16 pairs, the even elements
// are a pair's bits shifted up, the odd ones its high half, so they widen without shuffles, and
// the input comes widened and split into its even (`even`) and odd (`odd`) elements, k / 2 a row.
SHARDWISE_CPU_CLONES
void dot_products(float* __restrict out, const float* __restrict even, const float* __restrict odd,
                  const BFloat16* __restrict inp, const BFloat16* __restrict weight,
                  std::size_t rows, std::size_t n, std::size_t k, bool accumulate,
                  std::size_t first, std::size_t last) {
  using detail::kLanes;
  const std::size_t half = k / 2;
  const std::size_t whole = half / kLanes * kLanes;  // pairs in whole 64-byte loads
  for (std::size_t j = first; j < last; ++j) {
    const BFloat16* w = weight + j * k;
    for (std::size_t r = 0; r < rows; ++r) {
      const float* xe = even + r * half;
      const float* xo = odd + r * half;
      detail::LaneVector low{}, high{};
      for (std::size_t i = 0; i < whole; i += kLanes) {
        detail::LaneBits pairs;
        std::memcpy(&pairs, w + 2 * i, sizeof pairs);
        const detail::LaneBits even_bits = pairs << 16;
        const detail::LaneBits odd_bits = pairs & 0xFFFF0000U;
        detail::LaneVector we, wo;
        std::memcpy(&we, &even_bits, sizeof we);
        std::memcpy(&wo, &odd_bits, sizeof wo);
        low += we * detail::load_lanes(xe + i);
        high += wo * detail::load_lanes(xo + i);
      }
      float sum = detail::sum_lanes(low + high);
      for (std::size_t i = 2 * whole; i < k; ++i) {
        sum += shardwise::to_float(inp[r * k + i]) * shardwise::to_float(w[i]);
      }
      out[r * n + j] = accumulate ? out[r * n + j] + sum : sum;
    }
  }
}

// Rows at most this many take dot_products (a batch of decoded tokens); more, the matrix product.
constexpr std::size_t kDotProductRows = 4;

// Row-major C (m x n, float32) = op(A) op(B) (+ C where accumulate), A and B bf16.
void bf16_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
               const BFloat16* a, std::size_t lda, const BFloat16* b, std::size_t ldb,
               bool accumulate, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) {
      for (std::size_t r = 0; r < m; ++r) std::fill(c + r * ldc, c + r * ldc + n, 0.0F);
    }
    return;
  }
  if (!units_in_use()) {
    // Widened to float32: the same products on the float32 kernel.
    // Each stored operand's last row ends at its columns, not at the leading dimension.
    const auto stored = [](bool trans, std::size_t rows, std::size_t cols, std::size_t ld) {
      return trans ? (cols - 1) * ld + rows : (rows - 1) * ld + cols;
    };
    const std::size_t a_elements = stored(trans_a, m, k, lda),
                      b_elements = stored(trans_b, k, n, ldb);
    // Kept by the thread between calls up to kKeptWidenedFloats, as a step's shapes repeat and
    // a fresh vector of megabytes each call is memory mapped and faulted in again; larger ones
    // (a vocabulary's head: hundreds of MB) are the call's alone, not held between steps.
    thread_local std::vector<float> kept;
    std::vector<float> for_this_call;
    std::vector<float>& wide = a_elements + b_elements <= kKeptWidenedFloats ? kept : for_this_call;
    if (wide.size() < a_elements + b_elements) wide.resize(a_elements + b_elements);
    float* const wide_a = wide.data();
    float* const wide_b = wide_a + a_elements;
    to_float({a, a_elements}, {wide_a, a_elements});
    to_float({b, b_elements}, {wide_b, b_elements});
    detail::sgemm(trans_a, trans_b, m, n, k, 1.0F, wide_a, lda, wide_b, ldb,
                  accumulate ? 1.0F : 0.0F, c, ldc);
    return;
  }
  Cache& cached = cache();
  const Key key{trans_a, trans_b, m, n, k, lda, ldb, ldc, accumulate};
  auto found = cached.products.find(key);
  if (found == cached.products.end()) {
    if (cached.products.size() >= kMostCachedProducts) cached.products.clear();
    using dt = dnnl::memory::data_type;
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0F);
      attr.set_post_ops(sum);
    }
    const dnnl::memory::desc a_md = desc_of({trans_a, m, k, lda}, dt::bf16);
    const dnnl::memory::desc b_md = desc_of({trans_b, k, n, ldb}, dt::bf16);
    const dnnl::memory::desc c_md = desc_of({false, m, n, ldc}, dt::f32);
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd(cached.engine, a_md, b_md, c_md, attr);
#else
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr,
                                          cached.engine);
#endif
    found = cached.products.emplace(key, Product{dnnl::matmul(pd), a_md, b_md, c_md}).first;
  }
  const Product& product = found->second;
  // oneDNN's memory objects take mutable pointers; the operands are only read.
  dnnl::memory a_mem(product.a, cached.engine, const_cast<BFloat16*>(a));
  dnnl::memory b_mem(product.b, cached.engine, const_cast<BFloat16*>(b));
  dnnl::memory c_mem(product.c, cached.engine, c);
  product.primitive.execute(
      cached.stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  cached.stream.wait();
}

}  // namespace

bool bf16_units() { return has_units(); }
bool bf16_units_faster() { return has_units() && units_faster(); }
bool bf16_units_used() { return units_in_use(); }
void use_bf16_units(std::optional<bool> use) {
  units_setting.store(use.has_value() ? static_cast<int>(*use) : kUnitsByDefault);
}

std::string bf16_emulation_note() {
  if (bf16_units_used()) return {};
  if (!bf16_units()) {
    return "bf16 is emulated: this CPU has no bf16 units (AVX512_BF16 or AMX), so the products "
           "widen their bf16 operands to float32: the same sums, not faster";
  }
  if (units_setting.load() == 0) {
    return "bf16 is emulated: the bf16 units are turned off, so the products widen their bf16 "
           "operands to float32: the same sums, not faster";
  }
  return "bf16 products run widened to float32: this CPU's bf16 units (AVX512_BF16 without AMX) "
         "are slower than its float32 FMAs, so the products widen their bf16 operands to float32 "
         "(the same sums); bf16 still halves the gathers, messages and kept activations";
}

void to_bf16(std::span<const float> in, std::span<BFloat16> out) {
  if (in.size() != out.size()) {
    throw InvalidArgument("to_bf16: " + std::to_string(in.size()) + " floats into " +
                          std::to_string(out.size()) + " bf16 elements");
  }
  detail::parallel_for(in.size(), 4096, [&](std::size_t first, std::size_t last) {
    round_range(in.data() + first, out.data() + first, last - first);
  });
}

void to_float(std::span<const BFloat16> in, std::span<float> out) {
  if (in.size() != out.size()) {
    throw InvalidArgument("to_float: " + std::to_string(in.size()) + " bf16 elements into " +
                          std::to_string(out.size()) + " floats");
  }
  detail::parallel_for(in.size(), 4096, [&](std::size_t first, std::size_t last) {
    widen_range(in.data() + first, out.data() + first, last - first);
  });
}

void round_to_bf16(std::span<float> values) {
  detail::parallel_for(values.size(), 4096, [&](std::size_t first, std::size_t last) {
    round_in_place(values.data() + first, last - first);
  });
}

void round_to_bf16(std::span<float> values, std::span<BFloat16> kept) {
  if (values.size() != kept.size()) {
    throw InvalidArgument("round_to_bf16: " + std::to_string(values.size()) + " floats kept in " +
                          std::to_string(kept.size()) + " bf16 elements");
  }
  detail::parallel_for(values.size(), 4096, [&](std::size_t first, std::size_t last) {
    round_in_place_and_keep(values.data() + first, kept.data() + first, last - first);
  });
}

void matmul_forward_bf16(float* out, const BFloat16* inp, const BFloat16* weight, const float* bias,
                         std::size_t rows, std::size_t in, std::size_t out_features) {
  if (rows == 0 || out_features == 0) return;
  if (bias != nullptr) detail::fill_rows_with_bias(out, bias, rows, out_features);
  if (rows <= kDotProductRows) {
    thread_local std::vector<float> split;
    const std::size_t half = in / 2;
    split.resize(2 * rows * half);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < half; ++i) {
        split[r * half + i] = shardwise::to_float(inp[r * in + 2 * i]);
        split[(rows + r) * half + i] = shardwise::to_float(inp[r * in + 2 * i + 1]);
      }
    }
    const float* even = split.data();
    const float* odd = split.data() + rows * half;
    detail::parallel_for(out_features, 64, [&](std::size_t first, std::size_t last) {
      dot_products(out, even, odd, inp, weight, rows, out_features, in, bias != nullptr, first,
                   last);
    });
    return;
  }
  bf16_gemm(false, true, rows, out_features, in, inp, in, weight, in, bias != nullptr, out,
            out_features);
}

void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                          const BFloat16* inp, const BFloat16* weight, std::size_t rows,
                          std::size_t in, std::size_t out_features, InputGradient input_gradient) {
  if (rows == 0 || in == 0) return;
  if (out_features == 0) {
    if (input_gradient == InputGradient::kOverwrite) std::fill(dinp, dinp + rows * in, 0.0F);
    return;
  }
  bf16_gemm(true, false, out_features, in, rows, dout, out_features, inp, in, true, dweight, in);
  bf16_gemm(false, false, rows, in, out_features, dout, out_features, weight, in,
            input_gradient == InputGradient::kAccumulate, dinp, in);
  if (dbias != nullptr) {
    detail::parallel_for(out_features, 32, [&](std::size_t first, std::size_t last) {
      add_column_sums(dbias, dout, rows, out_features, first, last);
    });
  }
}

}  // namespace shardwise::kernels

#pragma once
// What the kernels' loops share: an exp that vectorises, and the attribute that compiles a loop
// for each instruction set the machines have, chosen when the program loads.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace shardwise::kernels::detail {

// The kernels pass vectors of 16 floats (lane_vector.hpp) by value between inline functions.
// Where the machine has no 64-byte registers such a value spans two or four, and GCC (and
// clang, when it generates code) notes at every use, or at the template it is used in, that
// passing it by value changes the calling convention. No such value crosses a function the
// kernel files do not inline, so the note does not apply; it is off for the rest of each kernel
// file, from here, ahead of the first template that may take such a value.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// The bits of `from` as a `To` of the same size: std::bit_cast, but through memcpy, which
// GCC 12's UBSan also reads right on vector types (it misreports bit_cast of them as a null
// load).
template <class To, class From>
[[gnu::always_inline]] inline To same_bits(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

// e^x in float to about 2 ulp (Cephes' expf: Cody-Waite reduction, a degree-6 polynomial, the
// exponent set through the bits), written so that loops over it vectorise; std::tanh does not,
// and GELU's tanh was a third of a GPT step. One body for a float (Value float, Bits
// std::uint32_t) and for a vector of lanes (lane_vector.hpp), so that both give the same bits.
template <class Value, class Bits>
[[gnu::always_inline]] inline Value exp_of(Value x) {
  const Value low = Value{} - 87.0F, high = Value{} + 88.0F;
  x = x < low ? low : x;    // std::max(x, -87): NaN passes through, and the result is NaN
  x = high < x ? high : x;  // std::min(x, 88)
  // Rounds to the nearest integer by adding and taking away 1.5 x 2^23 (no call to floor); the
  // integer is then the low bits of `shifted`, read without a float-to-int conversion, which
  // would be undefined for NaN.
  const Value round = Value{} + 12582912.0F;
  const Value shifted = x * 1.44269504088896341F + round;
  const Value n = shifted - round;
  const Bits k = same_bits<Bits>(shifted) - same_bits<Bits>(round);
  const Value r = x - n * 0.693359375F + n * 2.12194440e-4F;
  Value p = Value{} + 1.9875691500E-4F;
  p = p * r + 1.3981999507E-3F;
  p = p * r + 8.3334519073E-3F;
  p = p * r + 4.1665795894E-2F;
  p = p * r + 1.6666665459E-1F;
  p = p * r + 5.0000001201E-1F;
  p = p * r * r + r + 1.0F;
  return p * same_bits<Value>((k + 127U) << 23);
}

inline float fast_exp(float x) { return exp_of<float, std::uint32_t>(x); }

// Row reductions (LayerNorm's sums, the softmax's largest logit and sum) keep this many partial
// results, lane c % kLanes taking column c, and combine them in a fixed order at the end: the
// loops vectorise (one running sum is a chain of dependent scalar adds), and a row's result does
// not depend on the machine's vector width or on the thread count.
inline constexpr std::size_t kLanes = 16;

}  // namespace shardwise::kernels::detail

// Compiled for AVX-512, AVX2 and baseline x86-64, chosen at load time: this project's machines
// change CPU between sessions. Not under ThreadSanitizer, whose runtime is not up yet when the
// loader runs the clones' resolver.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define SHARDWISE_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SHARDWISE_CPU_CLONES
#endif

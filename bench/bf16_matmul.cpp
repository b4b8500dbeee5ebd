// bf16 matrix products against float32 ones at the models' shapes, on this CPU:
//   bf16_matmul THREADS
// For each shape (rows x in -> out, a linear layer's forward) it prints GFLOP/s of oneDNN's
// sgemm and of oneDNN's bf16 matmul primitive (bf16 operands, float32 accumulation) three
// ways: float32 output with the weights as nn.Linear stores them (out x in), bf16 output so, and
// bf16 output with the weights packed once into the primitive's own layout (as a step would pack
// its bf16 weights after the optimizer writes them). The best of 7 calls each, after a warm one.
// The choice of the bf16 products' form starts here (docs/benchmarks.md, "bf16 matrix products").
#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <string>
#include <vector>

extern "C" void omp_set_num_threads(int threads);

namespace {

struct Shape {
  const char* model;
  const char* what;
  int rows, in, out;
};

// Rows are a step's micro-batch: small 16 x 256, gpt2 2 x 1024, smollm2-135m 2 x 1024.
const Shape kShapes[] = {
    {"small", "qkv", 4096, 384, 1152},         {"small", "mlp up", 4096, 384, 1536},
    {"small", "mlp down", 4096, 1536, 384},    {"gpt2", "qkv", 2048, 768, 2304},
    {"gpt2", "mlp up", 2048, 768, 3072},       {"gpt2", "mlp down", 2048, 3072, 768},
    {"smollm2-135m", "q", 2048, 576, 576},     {"smollm2-135m", "gate+up", 2048, 576, 3072},
    {"smollm2-135m", "down", 2048, 1536, 576}, {"square", "2048^3", 2048, 2048, 2048},
};

std::uint16_t to_bf16(float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x7FFF + ((bits >> 16) & 1);  // to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}

template <class F>
double best_seconds(F&& run) {
  run();  // warm: primitives built, pages touched
  double best = 1e30;
  for (int round = 0; round < 7; ++round) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dnnl::matmul::primitive_desc matmul_desc(const dnnl::engine& engine, const dnnl::memory::desc& a,
                                         const dnnl::memory::desc& w, const dnnl::memory::desc& c) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, a, w, c};
#else
  return {dnnl::matmul::desc(a, w, c), engine};
#endif
}

// Seconds of one bf16 product: a (rows x in), w stored out x in, out of type `out_type`;
// `packed`: the weights reordered once, beforehand, into the layout the primitive chooses.
double bf16_seconds(const dnnl::engine& engine, dnnl::stream& stream, const Shape& s,
                    std::vector<std::uint16_t>& a16, std::vector<std::uint16_t>& w16, void* out,
                    dt out_type, bool packed, std::string& impl) {
  const dnnl::memory::desc a_md({s.rows, s.in}, dt::bf16, tag::ab);
  const dnnl::memory::desc w_plain({s.in, s.out}, dt::bf16, tag::ba);
  const dnnl::memory::desc c_md({s.rows, s.out}, out_type, tag::ab);
  const dnnl::matmul::primitive_desc pd = matmul_desc(
      engine, a_md, packed ? dnnl::memory::desc({s.in, s.out}, dt::bf16, tag::any) : w_plain, c_md);
  impl = pd.impl_info_str();
  const dnnl::matmul product(pd);
  dnnl::memory a_mem(a_md, engine, a16.data()), w_user(w_plain, engine, w16.data()),
      c_mem(c_md, engine, out);
  dnnl::memory w_mem = w_user;
  if (packed) {
    w_mem = dnnl::memory(pd.weights_desc(), engine);
    dnnl::reorder(w_user, w_mem).execute(stream, w_user, w_mem);
    stream.wait();
  }
  return best_seconds([&] {
    product.execute(stream,
                    {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  });
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::printf("oneDNN %d.%d, threads %d\n", dnnl_version()->major, dnnl_version()->minor, threads);
  std::printf("%-13s %-9s %5s %5s %5s %9s %9s %9s %9s %7s  %s\n", "model", "product", "rows", "in",
              "out", "fp32", "bf16>f32", "bf16>bf16", "packed", "packed/", "bf16 kernel");
  std::printf("%-13s %-9s %5s %5s %5s %9s %9s %9s %9s %7s\n", "", "", "", "", "", "GF/s", "GF/s",
              "GF/s", "GF/s", "fp32");
  for (const Shape& s : kShapes) {
    const auto m = static_cast<std::size_t>(s.rows), k = static_cast<std::size_t>(s.in),
               n = static_cast<std::size_t>(s.out);
    std::vector<float> a(m * k), w(n * k), c(m * n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 101) / 101;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 104729) % 97) / 97;
    const double gflop =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / 1e9;
    // float32: out = a w^T, oneDNN's sgemm as the kernels call it.
    const double fp32 = best_seconds([&] {
      dnnl_sgemm('N', 'T', s.rows, s.out, s.in, 1.0F, a.data(), s.in, w.data(), s.in, 0.0F,
                 c.data(), s.out);
    });
    std::vector<std::uint16_t> a16(a.size()), w16(w.size()), c16(c.size());
    for (std::size_t i = 0; i < a.size(); ++i) a16[i] = to_bf16(a[i]);
    for (std::size_t i = 0; i < w.size(); ++i) w16[i] = to_bf16(w[i]);
    std::string impl;
    const double to_f32 = bf16_seconds(engine, stream, s, a16, w16, c.data(), dt::f32, false, impl);
    const double to_bf16_out =
        bf16_seconds(engine, stream, s, a16, w16, c16.data(), dt::bf16, false, impl);
    const double packed =
        bf16_seconds(engine, stream, s, a16, w16, c16.data(), dt::bf16, true, impl);
    std::printf("%-13s %-9s %5d %5d %5d %9.1f %9.1f %9.1f %9.1f %7.2f  %s\n", s.model, s.what,
                s.rows, s.in, s.out, gflop / fp32, gflop / to_f32, gflop / to_bf16_out,
                gflop / packed, fp32 / packed, impl.c_str());
  }
  return 0;
}

// The three forms of a linear layer's products at `small`'s shapes (rows 16 x 256, width 384),
// on 2 threads with cold operands (a 64 MB sweep before each call, as a step's layers leave
// them): the forward product X W^T and the input gradient dY W on oneDNN's sgemm (what the
// kernels call), the weight gradient dY^T X on the project's packed kernel (gemm_at_b.hpp), and
// each form on MKL where its path is given (cblas_sgemm, loaded at run time; PyTorch's wheels
// carry MKL). GFLOP/s, the mean of 6 calls after one more. Built against the release build:
//   g++ -O2 -std=c++20 -Iinclude -Isrc bench/gemm_forms.cpp build/release/src/libshardwise.a
//       -lre2 -ldnnl -lgomp -lpthread -ldl -o build/gemm_forms   (one command)
//   build/gemm_forms [path/to/libmkl_rt.so.N]   (MKL: build/peer-venv/bin/pip install mkl)
#include <dlfcn.h>
#include <dnnl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/gemm_at_b.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace {

using Clock = std::chrono::steady_clock;
// cblas_sgemm(layout, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
using Cblas = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                       float, float*, int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

std::vector<float> values(std::size_t count, std::uint32_t seed) {
  std::vector<float> v(count);
  for (auto& x : v) {
    seed = seed * 1664525U + 1013904223U;
    x = static_cast<float>(seed >> 8) / 8388608.0F - 1.0F;
  }
  return v;
}

std::vector<float> sweep(std::size_t{64} << 18);  // 64 MB

void evict_caches() {
  for (std::size_t i = 0; i < sweep.size(); i += 16) sweep[i] += 1.0F;
}

template <class Call>
double gflops(Call call, double flops) {
  double seconds = 0;
  for (int round = 0; round < 7; ++round) {
    evict_caches();
    const auto start = Clock::now();
    call();
    if (round > 0) seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  return flops * 6 / seconds / 1e9;
}

// One form's rate on the kernels' own path and, where MKL is loaded, on MKL.
template <class Ours, class Mkl>
void print_form(const char* form, double flops, bool with_mkl, Ours ours, Mkl on_mkl) {
  std::printf("  %s %5.0f", form, gflops(ours, flops));
  if (with_mkl) std::printf(" (MKL %5.0f)", gflops(on_mkl, flops));
}

}  // namespace

int main(int argc, char** argv) {
  namespace d = shardwise::kernels::detail;
  if (argc > 2 || (argc == 2 && argv[1][0] == '\0')) {
    std::fprintf(stderr, "usage: gemm_forms [path/to/libmkl_rt.so.N]\n");
    return 2;
  }
  Cblas mkl = nullptr;
  if (argc > 1) {
    void* library = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
      return 2;
    }
    mkl = reinterpret_cast<Cblas>(dlsym(library, "cblas_sgemm"));
    if (mkl == nullptr) {
      std::fprintf(stderr, "%s has no cblas_sgemm (expected MKL's libmkl_rt)\n", argv[1]);
      return 2;
    }
  }
  const auto kernel = d::best_tile_kernel();
  if (!kernel) {
    std::fprintf(stderr, "this machine has no tile kernel for gemm_at_b (AVX2 and FMA)\n");
    return 1;
  }
  shardwise::kernels::set_blas_threads(2);
  constexpr int kRows = 16 * 256;
  struct Layer {
    const char* name;
    int in, out;
  };
  for (const Layer layer : {Layer{"qkv", 384, 1152}, Layer{"attproj", 384, 384},
                            Layer{"fc", 384, 1536}, Layer{"fcproj", 1536, 384}}) {
    const auto rows = static_cast<std::size_t>(kRows);
    const auto in = static_cast<std::size_t>(layer.in), out = static_cast<std::size_t>(layer.out);
    auto x = values(rows * in, 1), w = values(out * in, 2), y = values(rows * out, 3);
    auto dy = values(rows * out, 4), dx = values(rows * in, 5), dw = values(out * in, 6);
    const double flops = 2.0 * kRows * layer.in * layer.out;
    const int m = kRows, i = layer.in, o = layer.out;
    std::printf("%-8s", layer.name);
    print_form(
        "forward", flops, mkl != nullptr,
        [&] { dnnl_sgemm('N', 'T', m, o, i, 1, x.data(), i, w.data(), i, 0, y.data(), o); },
        [&] {
          mkl(kRowMajor, kNoTrans, kTrans, m, o, i, 1, x.data(), i, w.data(), i, 0, y.data(), o);
        });
    print_form(
        "input gradient", flops, mkl != nullptr,
        [&] { dnnl_sgemm('N', 'N', m, i, o, 1, dy.data(), o, w.data(), i, 0, dx.data(), i); },
        [&] {
          mkl(kRowMajor, kNoTrans, kNoTrans, m, i, o, 1, dy.data(), o, w.data(), i, 0, dx.data(),
              i);
        });
    print_form(
        "weight gradient", flops, mkl != nullptr,
        [&] {
          d::gemm_at_b(*kernel, out, in, rows, 1, dy.data(), out, x.data(), in, 1, dw.data(), in);
        },
        [&] {
          mkl(kRowMajor, kTrans, kNoTrans, o, i, m, 1, dy.data(), o, x.data(), i, 1, dw.data(), i);
        });
    std::printf("  GFLOP/s\n");
  }
  return 0;
}

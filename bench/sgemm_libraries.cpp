// sgemm of the GPT's own matrix shapes on one BLAS library, loaded at run time, so that every
// library that installs here can be compared in the same program:
//   sgemm_libraries LIBRARY_PATH THREADS PRESET
// LIBRARY_PATH is a shared object exporting cblas_sgemm (OpenBLAS, BLIS, MKL's mkl_rt) or
// dnnl_sgemm (oneDNN); PRESET is tiny (batch 12), small (batch 16) or gpt2 (batch 2, context
// 1024). Prints one line: the library, the threads, GFLOP/s over the shapes of one training step
// (forward and backward of every matrix product, weighted by their FLOPs) and the best single
// shape.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

namespace {

// CBLAS's enumerations, as every CBLAS defines them.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
// oneDNN's row-major sgemm: C = alpha op(A) op(B) + beta C.
using DnnlSgemm = int (*)(char, char, long long, long long, long long, float, const float*,
                          long long, const float*, long long, float, float*, long long);
using SetThreads = void (*)(int);

struct Shape {
  bool trans_a;
  bool trans_b;
  int m, n, k;
};

// The matrix products of one GPT training step with width C, rows BT (batch x context) and
// vocabulary V: per layer qkv, attention projection, MLP up and down, each forward (A x W^T),
// backward to the input (dY x W) and to the weight (dY^T x X); and the tied head.
std::vector<std::pair<Shape, int>> step_shapes(int C, int BT, int V, int layers) {
  std::vector<std::pair<Shape, int>> shapes;
  for (const auto& [in, out, times] : std::vector<std::tuple<int, int, int>>{
           {C, 3 * C, layers}, {C, C, layers}, {C, 4 * C, layers}, {4 * C, C, layers}, {C, V, 1}}) {
    shapes.emplace_back(Shape{false, true, BT, out, in}, times);
    shapes.emplace_back(Shape{false, false, BT, in, out}, times);
    shapes.emplace_back(Shape{true, false, out, in, BT}, times);
  }
  return shapes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: sgemm_libraries LIBRARY_PATH THREADS tiny|small|gpt2\n");
    return 2;
  }
  const std::string path = argv[1];
  const int threads = std::atoi(argv[2]);
  const std::string preset = argv[3];
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), dlerror());
    return 1;
  }
  auto cblas = reinterpret_cast<CblasSgemm>(dlsym(lib, "cblas_sgemm"));
  auto dnnl = reinterpret_cast<DnnlSgemm>(dlsym(lib, "dnnl_sgemm"));
  if (cblas == nullptr && dnnl == nullptr) {
    std::fprintf(stderr, "%s exports neither cblas_sgemm nor dnnl_sgemm\n", path.c_str());
    return 1;
  }
  // Each library's own thread setting (oneDNN follows OMP_NUM_THREADS, set by the caller).
  for (const char* name :
       {"openblas_set_num_threads", "bli_thread_set_num_threads", "MKL_Set_Num_Threads"}) {
    if (auto set = reinterpret_cast<SetThreads>(dlsym(lib, name))) set(threads);
  }
  // The presets' widths, batches and layers as the training benchmarks run them (gpt2: batch 2
  // of context 1024).
  const bool tiny = preset == "tiny";
  const bool gpt2 = preset == "gpt2";
  if (!tiny && !gpt2 && preset != "small") {
    std::fprintf(stderr, "preset is '%s'; expected tiny, small or gpt2\n", preset.c_str());
    return 2;
  }
  const int C = tiny ? 128 : gpt2 ? 768 : 384;
  const int BT = tiny ? 12 * 64 : gpt2 ? 2 * 1024 : 16 * 256;
  const auto shapes = step_shapes(C, BT, 256, tiny ? 4 : gpt2 ? 12 : 6);
  std::size_t largest = 0;
  for (const auto& [s, times] : shapes) {
    largest = std::max({largest, static_cast<std::size_t>(s.m) * s.k,
                        static_cast<std::size_t>(s.k) * s.n, static_cast<std::size_t>(s.m) * s.n});
  }
  std::vector<float> a(largest, 0.01F), b(largest, 0.02F), c(largest, 0.0F);
  const auto run = [&](const Shape& s) {
    const int lda = s.trans_a ? s.m : s.k;
    const int ldb = s.trans_b ? s.k : s.n;
    if (cblas != nullptr) {
      cblas(kRowMajor, s.trans_a ? kTrans : kNoTrans, s.trans_b ? kTrans : kNoTrans, s.m, s.n, s.k,
            1.0F, a.data(), lda, b.data(), ldb, 1.0F, c.data(), s.n);
    } else {
      dnnl(s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', s.m, s.n, s.k, 1.0F, a.data(), lda,
           b.data(), ldb, 1.0F, c.data(), s.n);
    }
  };
  using Clock = std::chrono::steady_clock;
  double total_flops = 0;
  double total_seconds = 0;
  double best = 0;
  for (const auto& [s, times] : shapes) {
    run(s);  // warm-up
    const double flops = 2.0 * s.m * s.n * s.k;
    // The fastest of 5 rounds of enough repetitions for about 20 ms.
    const int reps = std::max(1, static_cast<int>(2e7 / std::max(1.0, flops / 1e3)));
    double fastest = 1e30;
    for (int round = 0; round < 5; ++round) {
      const auto start = Clock::now();
      for (int r = 0; r < reps; ++r) run(s);
      fastest =
          std::min(fastest, std::chrono::duration<double>(Clock::now() - start).count() / reps);
    }
    total_flops += flops * times;
    total_seconds += fastest * times;
    best = std::max(best, flops / fastest / 1e9);
  }
  std::printf("%s threads=%d preset=%s step_gflops=%.1f best_shape_gflops=%.1f\n", path.c_str(),
              threads, preset.c_str(), total_flops / total_seconds / 1e9, best);
  return 0;
}

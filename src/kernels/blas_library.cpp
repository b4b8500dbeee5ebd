#include "shardwise/kernels/blas_library.hpp"

#include <dlfcn.h>
#include <dnnl.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "mkl_sgemm.hpp"
#include "shardwise/core/error.hpp"

// The OpenMP runtime the kernels run on (gemm.cpp says why these are declared here).
extern "C" int omp_get_max_threads();
extern "C" int omp_in_parallel();

namespace shardwise::kernels {
namespace {

// MKL's C interface, by value as MKL's headers (mkl_cblas.h, mkl_service.h) define it; the
// headers are not needed to build, only the library to run.
using CblasSgemm = void (*)(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);
using SetLayer = int (*)(int code);
using SetThreadsLocal = int (*)(int threads);
using VersionString = void (*)(char* text, int length);
constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;
constexpr int kMklInterfaceLp64 = 0;
constexpr int kMklThreadingGnu = 3;

struct MklLibrary {
  CblasSgemm sgemm = nullptr;
  SetThreadsLocal set_threads_local = nullptr;
  std::string setting;  // "mkl" or "mkl:PATH"
  std::string description;
};

std::mutex selection_mutex;
// Libraries loaded so far, by the file asked for; never unloaded or destroyed, since another
// thread may be inside one when the selection changes (or while the process exits).
auto& loaded_libraries = *new std::map<std::string, std::unique_ptr<const MklLibrary>>;
// The selected MKL; null while oneDNN is selected.
std::atomic<const MklLibrary*> selected_mkl{nullptr};

// A path, or the loader's message about one, as an error shows it: control characters escaped,
// and cut short where it is long.
std::string shown_path(std::string_view text) { return echo_input(text, 300); }

template <class Function>
Function symbol(void* library, const char* name, const std::string& file, std::string_view source) {
  void* address = dlsym(library, name);
  if (address == nullptr) {
    throw Error(std::string(source) + ": " + shown_path(file) + " has no " + name +
                "; expected Intel MKL's runtime library, libmkl_rt");
  }
  return reinterpret_cast<Function>(address);
}

// "MKL 2025.0.1 (FILE)" from MKL's "Intel(R) oneAPI Math Kernel Library Version 2025.0.1-Product
// Build ..."; the whole text where it has another form.
std::string mkl_description(VersionString version, std::string_view file) {
  char text[512] = {};
  version(text, static_cast<int>(sizeof text - 1));
  std::string whole(text);
  const std::size_t at = whole.find("Version ");
  if (at != std::string::npos) {
    const std::size_t from = at + 8;
    whole = "MKL " + whole.substr(from, whole.find_first_of(" -", from) - from);
  }
  return whole + " (" + std::string(file) + ")";
}

// Opens `file` (a path, or a name the dynamic loader searches for) and sets MKL up to take its
// threads from libgomp with 32-bit integers: both before any other call into MKL, as MKL asks.
std::unique_ptr<MklLibrary> open_mkl(const std::string& file, std::string_view source) {
  // A path must name a regular file: the loader would wait forever reading a FIFO.
  std::error_code error;
  if (file.find('/') != std::string::npos && !std::filesystem::is_regular_file(file, error)) {
    throw Error(std::string(source) + ": " + shown_path(file) +
                " is not a regular file; expected the " +
                "path of Intel MKL's runtime library, libmkl_rt");
  }
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    throw Error(std::string(source) + ": cannot load " + shown_path(file) + ": " +
                (reason ? shown_path(reason) : "unknown reason"));
  }
  auto mkl = std::make_unique<MklLibrary>();
  try {
    const auto set_interface = symbol<SetLayer>(library, "MKL_Set_Interface_Layer", file, source);
    const auto set_threading = symbol<SetLayer>(library, "MKL_Set_Threading_Layer", file, source);
    mkl->sgemm = symbol<CblasSgemm>(library, "cblas_sgemm", file, source);
    mkl->set_threads_local =
        symbol<SetThreadsLocal>(library, "MKL_Set_Num_Threads_Local", file, source);
    const auto version = symbol<VersionString>(library, "MKL_Get_Version_String", file, source);
    const int interface = set_interface(kMklInterfaceLp64);
    const int threading = set_threading(kMklThreadingGnu);
    if (interface != kMklInterfaceLp64 || threading != kMklThreadingGnu) {
      throw Error(std::string(source) + ": " + shown_path(file) + " keeps interface layer " +
                  std::to_string(interface) + " and threading layer " + std::to_string(threading) +
                  " (another part of this process set them up first); expected LP64 (0) " +
                  "and GNU OpenMP (3)");
    }
    mkl->description = mkl_description(version, file);
  } catch (...) {
    dlclose(library);
    throw;
  }
  return mkl;
}

// The library for "mkl" or "mkl:PATH", loaded once.
const MklLibrary* load_mkl(std::string_view path, std::string_view source) {
  const std::string key(path);
  if (const auto found = loaded_libraries.find(key); found != loaded_libraries.end()) {
    return found->second.get();
  }
  std::unique_ptr<MklLibrary> mkl;
  if (!path.empty()) {
    mkl = open_mkl(key, source);
  } else {
    std::string reasons;
    for (const char* name : {"libmkl_rt.so.2", "libmkl_rt.so.3", "libmkl_rt.so"}) {
      try {
        mkl = open_mkl(name, source);
        break;
      } catch (const Error& e) {
        reasons += std::string(reasons.empty() ? "" : "; ") + e.what();
      }
    }
    if (!mkl) {
      throw Error(reasons +
                  " (give the library's path as mkl:PATH, or add its folder to "
                  "LD_LIBRARY_PATH)");
    }
  }
  auto& entry = loaded_libraries[key];
  mkl->setting = path.empty() ? "mkl" : "mkl:" + key;
  entry = std::move(mkl);
  return entry.get();
}

bool fits_int(std::size_t value) { return value <= static_cast<std::size_t>(INT_MAX); }

// Products MKL was selected for whose sizes its 32-bit interface cannot hold: oneDNN ran them.
std::atomic<std::uint64_t> products_past_mkl_sizes{0};

}  // namespace

void select_blas(std::string_view setting, std::string_view source) {
  constexpr std::string_view kMkl = "mkl";
  constexpr std::string_view kMklAt = "mkl:";
  if (setting == "onednn") {
    selected_mkl.store(nullptr);
    return;
  }
  if (setting != kMkl && !setting.starts_with(kMklAt)) {
    throw InvalidArgument(std::string(source) + " is '" + echo_input(setting) +
                          "'; expected onednn, mkl or mkl:PATH");
  }
  const std::string_view path =
      setting == kMkl ? std::string_view{} : setting.substr(kMklAt.size());
  if (setting != kMkl && path.empty()) {
    throw InvalidArgument(std::string(source) + " is 'mkl:' with no path; expected mkl:PATH");
  }
  std::lock_guard lock(selection_mutex);
  selected_mkl.store(load_mkl(path, source));
}

BlasLibrary blas_library() {
  return selected_mkl.load() != nullptr ? BlasLibrary::kMkl : BlasLibrary::kOneDnn;
}

std::string blas_setting() {
  const MklLibrary* mkl = selected_mkl.load();
  return mkl != nullptr ? mkl->setting : "onednn";
}

std::string blas_description() {
  if (const MklLibrary* mkl = selected_mkl.load()) {
    const std::uint64_t past = products_past_mkl_sizes.load();
    return past == 0 ? mkl->description
                     : mkl->description + " (" + std::to_string(past) + " product" +
                           (past == 1 ? "" : "s") + " past MKL's 32-bit sizes ran on oneDNN)";
  }
  const dnnl_version_t* version = dnnl_version();
  return "oneDNN " + std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
         std::to_string(version->patch);
}

namespace detail {

bool mkl_sgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
               float* c, std::size_t ldc) {
  const MklLibrary* mkl = selected_mkl.load(std::memory_order_acquire);
  if (mkl == nullptr) return false;
  for (const std::size_t size : {m, n, k, lda, ldb, ldc}) {
    if (!fits_int(size)) {
      products_past_mkl_sizes.fetch_add(1);
      return false;
    }
  }
  // MKL reports a stride shorter than its row on stderr and computes nothing; oneDNN fails the
  // call. Either is a kernel's bug: an error, as oneDNN's failure is.
  const std::size_t a_row = trans_a ? m : k;
  const std::size_t b_row = trans_b ? k : n;
  if (lda < std::max<std::size_t>(a_row, 1) || ldb < std::max<std::size_t>(b_row, 1) ||
      ldc < std::max<std::size_t>(n, 1)) {
    throw Error("sgemm of " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                std::to_string(k) + " on MKL: strides " + std::to_string(lda) + ", " +
                std::to_string(ldb) + ", " + std::to_string(ldc) + " are shorter than rows of " +
                std::to_string(a_row) + ", " + std::to_string(b_row) + ", " + std::to_string(n));
  }
#if defined(_OPENMP)
  // The calling thread's count, as oneDNN takes it: one inside a parallel region (a kernel's
  // loop calling products per tile), else the thread's OpenMP setting (set_blas_threads).
  mkl->set_threads_local(omp_in_parallel() != 0 ? 1 : omp_get_max_threads());
#else
  // Builds without OpenMP (ThreadSanitizer's, which does not see libgomp's synchronisation) run
  // the kernels' loops on the calling thread (parallel.hpp), and MKL's products too.
  mkl->set_threads_local(1);
#endif
  const auto as_int = [](std::size_t v) { return static_cast<int>(v); };
  mkl->sgemm(kCblasRowMajor, trans_a ? kCblasTrans : kCblasNoTrans,
             trans_b ? kCblasTrans : kCblasNoTrans, as_int(m), as_int(n), as_int(k), alpha, a,
             as_int(lda), b, as_int(ldb), beta, c, as_int(ldc));
  return true;
}

}  // namespace detail
}  // namespace shardwise::kernels

#pragma once
// Which library runs the kernels' matrix products: oneDNN, which every build links (the
// default), or Intel's MKL, loaded at run time from its single runtime library (libmkl_rt) where
// a user has it. The products' share of a training step is three quarters, and which library is
// the faster depends on the CPU (docs/dependencies.md: oneDNN on the AMD EPYC measured, MKL on
// the Intel Xeon), so a user on a machine where MKL leads chooses it; nothing chooses it for them.
//
// MKL runs its threads on the same OpenMP runtime as the rest of the kernels (GCC's libgomp), so
// set_blas_threads governs both and ranks that are threads of one process keep one thread each.

#include <string>
#include <string_view>

namespace shardwise::kernels {

enum class BlasLibrary { kOneDnn, kMkl };

// Selects the library from a setting: "onednn", "mkl" (libmkl_rt as the dynamic loader finds it:
// libmkl_rt.so.2, .so.3 or .so) or "mkl:PATH". `source` names the setting in errors (a flag, say).
// Throws InvalidArgument for any other value and Error where MKL does not load or is not MKL; the
// selection stays as it was then. For the whole process, and safe to call while other threads
// run products (each product runs on one library); a library once loaded stays loaded.
void select_blas(std::string_view setting, std::string_view source);

[[nodiscard]] BlasLibrary blas_library();

// The setting that selected the library in use ("onednn", "mkl" or "mkl:PATH"), for a caller
// that selects another for a while and then restores it.
[[nodiscard]] std::string blas_setting();

// The library in use and its version, e.g. "oneDNN 2.6.3" or "MKL 2025.0.1 (libmkl_rt.so.3)";
// with MKL, also how many products its 32-bit sizes could not hold and oneDNN ran instead.
[[nodiscard]] std::string blas_description();

}  // namespace shardwise::kernels

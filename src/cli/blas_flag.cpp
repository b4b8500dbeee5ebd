#include "blas_flag.hpp"

#include "shardwise/kernels/blas_library.hpp"

namespace shardwise::cli {

void add_blas_option(CLI::App& app, std::string& setting) {
  app.add_option("--blas", setting,
                 "Library of the matrix products: onednn, or Intel MKL where it leads "
                 "(docs/dependencies.md): mkl (libmkl_rt as the loader finds it) or mkl:PATH")
      ->default_val("onednn");
}

ScopedBlas::ScopedBlas(const std::string& setting) : caller_(kernels::blas_setting()) {
  kernels::select_blas(setting, "--blas");
}

// Selecting a library loaded before cannot fail.
ScopedBlas::~ScopedBlas() { kernels::select_blas(caller_, "--blas"); }

}  // namespace shardwise::cli

#pragma once
// --blas, the library of the matrix products (kernels/blas_library.hpp), for the commands that
// run them: `train`, and `plan --device cpu`, which measures this machine's product rate.

#include <CLI/CLI.hpp>
#include <string>

namespace shardwise::cli {

// Adds --blas to a command, its value kept in `setting` (default onednn).
void add_blas_option(CLI::App& app, std::string& setting);

// Selects the library for a command's run, and the caller's again when the run ends: the
// selection is the process's, and the commands run inside other programs too (the tests).
class ScopedBlas {
 public:
  explicit ScopedBlas(const std::string& setting);
  ScopedBlas(const ScopedBlas&) = delete;
  ScopedBlas& operator=(const ScopedBlas&) = delete;
  ~ScopedBlas();

 private:
  std::string caller_;
};

}  // namespace shardwise::cli

#pragma once
// The libmkl_rt that tests of MKL's products load: SHARDWISE_TEST_MKL where it is set, else the
// one scripts/install_bench_peers.sh leaves in build/peer-venv (the benchmarks' Python packages).
// Empty where this machine has neither: those tests are skipped, as MKL is optional.

#include <cstdlib>
#include <filesystem>
#include <string>

namespace shardwise::testing {

inline std::string mkl_for_tests() {
  if (const char* path = std::getenv("SHARDWISE_TEST_MKL"); path != nullptr && *path != '\0') {
    return path;
  }
  for (const char* name : {"libmkl_rt.so.3", "libmkl_rt.so.2"}) {
    const std::string path = std::string(SHARDWISE_SOURCE_DIR) + "/build/peer-venv/lib/" + name;
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) return path;
  }
  return {};
}

}  // namespace shardwise::testing

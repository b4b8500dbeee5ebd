#pragma once
// Runs the `shardwise` command in-process and captures what it prints.

#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace shardwise::cli::testing {

struct Result {
  int status;
  std::string out;
  std::string err;
};

inline Result run_command(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int status = run(args, out, err);
  return {status, out.str(), err.str()};
}

// A file of the source tree, e.g. "examples/models/gpt2.json".
inline std::string source_path(const std::string& relative) {
  return std::string(SHARDWISE_SOURCE_DIR) + "/" + relative;
}

}  // namespace shardwise::cli::testing

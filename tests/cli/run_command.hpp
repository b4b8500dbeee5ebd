#pragma once
// Runs the `shardwise` command in-process and captures what it prints.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
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

// Bad input: status 2, nothing on stdout, one line on stderr that contains `message`.
inline void expect_bad_input(const std::vector<std::string>& args, const std::string& message) {
  const Result r = run_command(args);
  EXPECT_EQ(r.status, 2) << message;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, ::testing::HasSubstr(message));
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

// One JSON value per line of `text` (the command's --json output).
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// A file of the source tree, e.g. "examples/models/gpt2.json".
inline std::string source_path(const std::string& relative) {
  return std::string(SHARDWISE_SOURCE_DIR) + "/" + relative;
}

}  // namespace shardwise::cli::testing

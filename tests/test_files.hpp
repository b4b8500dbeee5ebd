#pragma once
// A temporary file of the running test's own: ctest runs each test of a program in a process of
// its own, in parallel, so two tests writing one name in the temporary folder would collide.

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace shardwise::testing {

// TempDir() + "<suite>.<test>." + name, with the '/' of parameterised names made '_'.
inline std::string test_path(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string prefix = std::string(test->test_suite_name()) + "." + test->name() + ".";
  for (char& c : prefix) {
    if (c == '/') c = '_';
  }
  return ::testing::TempDir() + prefix + name;
}

// Writes `bytes` to test_path(name), replacing what was there, and returns the path.
inline std::string write_test_file(const std::string& name, const std::string& bytes) {
  const std::string path = test_path(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

}  // namespace shardwise::testing

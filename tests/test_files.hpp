#pragma once
// A temporary file of the running test's own: ctest runs each test of a program in a process of
// its own, in parallel, so two tests writing one name in the temporary folder would collide.

#include <gtest/gtest.h>

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

}  // namespace shardwise::testing

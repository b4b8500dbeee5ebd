#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.hpp"

namespace shardwise::cli {
namespace {

using ::testing::HasSubstr;

struct Result {
  int status;
  std::string out;
  std::string err;
};

Result run_command(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int status = run(args, out, err);
  return {status, out.str(), err.str()};
}

TEST(LayoutCommand, Placeholder) {
  Result r = run_command({"layout", "--mesh", "data=2,model=4", "--spec", "P('data', None)", "--shape", "8,16"});
  std::cout << r.out << r.err;
}

}  // namespace
}  // namespace shardwise::cli

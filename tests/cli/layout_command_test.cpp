#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "run_command.hpp"

namespace shardwise::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using testing::Result;
using testing::run_command;

TEST(LayoutCommand, ReportForAPerson) {
  const Result r = run_command({"layout", "--mesh", "data=2,model=2", "--spec",
                                "P(None, ('data','model'))", "--shape", "4,8"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "mesh          Mesh('data': 2, 'model': 2)\n"
            "spec          P(None, ('data', 'model'))\n"
            "global shape  (4, 8)\n"
            "shard shape   (4, 2)\n"
            "shards        1 x 4 = 4 distinct, each on 1 device\n"
            "\n"
            "device  coords          index       replica\n"
            "0       data=0 model=0  [0:4, 0:2]  0\n"
            "1       data=0 model=1  [0:4, 2:4]  0\n"
            "2       data=1 model=0  [0:4, 4:6]  0\n"
            "3       data=1 model=1  [0:4, 6:8]  0\n"
            "\n"
            "┌────────────────┬────────────────┬────────────────┬────────────────┐\n"
            "│                │                │                │                │\n"
            "│     dev 0      │     dev 1      │     dev 2      │     dev 3      │\n"
            "│                │                │                │                │\n"
            "└────────────────┴────────────────┴────────────────┴────────────────┘\n");
}

TEST(LayoutCommand, DrawingLabelsReplicatedBlocksWithEveryHolder) {
  const Result r =
      run_command({"layout", "--mesh", "x=4,y=2", "--spec", "P('x')", "--shape", "8,8"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* label : {"dev 0,1", "dev 2,3", "dev 4,5", "dev 6,7"}) {
    EXPECT_THAT(r.out, HasSubstr("│" + std::string(28, ' ') + label + std::string(29, ' ') + "│"))
        << label;
  }
  EXPECT_THAT(r.out, HasSubstr("shards        4 x 1 = 4 distinct, each on 2 devices\n"));
}

TEST(LayoutCommand, UnevenOneDimensional) {
  const Result r =
      run_command({"layout", "--mesh", "x=4", "--spec", "P('x')", "--shape", "10", "--uneven"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("shard shape   (3,)  (largest shard)\n"));
  EXPECT_THAT(r.out, HasSubstr("3       x=3     [9:10]  0\n"));
  EXPECT_THAT(r.out,
              HasSubstr("│       dev 0       │       dev 1       │       dev 2       │ dev 3 │\n"));
}

TEST(LayoutCommand, EmptyShardsAreNotDrawn) {
  const Result r =
      run_command({"layout", "--mesh", "x=4", "--spec", "P('x')", "--shape", "2", "--uneven"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dev 0"));
  EXPECT_THAT(r.out, HasSubstr("dev 1"));
  EXPECT_THAT(r.out, Not(HasSubstr("dev 2")));
}

TEST(LayoutCommand, HigherRanksAndEmptyArraysHaveNoDrawing) {
  Result r = run_command({"layout", "--mesh", "x=2", "--shape", "3,4,5"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(drawings are made for 1-D and 2-D arrays)"));
  r = run_command({"layout", "--mesh", "x=2", "--spec", "P('x')", "--shape", "0,3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(the array has no elements: nothing to draw)"));
  r = run_command({"layout", "--mesh", "x=2", "--shape", ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("1       x=1     []     1\n"));
}

TEST(LayoutCommand, JsonIsExactlyOneObject) {
  const Result r = run_command({"layout", "--mesh", "data=2,model=4", "--spec", "P('data', None)",
                                "--shape", "8,16", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1);
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["mesh"]["axis_names"], nlohmann::json({"data", "model"}));
  EXPECT_EQ(json["mesh"]["axis_sizes"], nlohmann::json({2, 4}));
  EXPECT_EQ(json["spec"], "P('data', None)");
  EXPECT_EQ(json["global_shape"], nlohmann::json({8, 16}));
  EXPECT_EQ(json["shard_shape"], nlohmann::json({4, 16}));
  ASSERT_EQ(json["shards"].size(), 8u);
  EXPECT_EQ(json["shards"][5],
            nlohmann::json::parse(R"({"device": 5, "index": [[4, 8], [0, 16]], "replica_id": 1})"));
  // Keys in the documented order.
  EXPECT_THAT(r.out,
              StartsWith("{\"mesh\":{\"axis_names\":[\"data\",\"model\"],\"axis_sizes\":[2,4]}"
                         ",\"spec\":\"P('data', None)\",\"global_shape\":[8,16],"
                         "\"shard_shape\":[4,16],\"shards\":[{\"device\":0,\"index\":"));
}

TEST(LayoutCommand, JsonUnevenAndExplicitDevices) {
  const Result r = run_command({"layout", "--mesh", "x=4", "--spec", "P('x')", "--shape", "5",
                                "--uneven", "--devices", "3,2,1,0", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["shard_shape"], nlohmann::json({2}));
  EXPECT_EQ(json["shards"][0],
            nlohmann::json::parse(R"({"device": 3, "index": [[0, 2]], "replica_id": 0})"));
  EXPECT_EQ(json["shards"][3],
            nlohmann::json::parse(R"({"device": 0, "index": [[5, 5]], "replica_id": 0})"));
}

struct BadInput {
  std::vector<std::string> args;
  std::string message;
};

class LayoutBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(LayoutBadInput, OneLineOnStderrStatus2NothingOnStdout) {
  const BadInput& c = GetParam();
  std::vector<std::string> args{"layout"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  testing::expect_bad_input(args, c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, LayoutBadInput,
    ::testing::Values(
        BadInput{{"--mesh", "data=0", "--shape", "4"}, "mesh axis 'data' has size 0"},
        BadInput{{"--mesh", "data", "--shape", "4"}, "cannot parse mesh 'data'"},
        BadInput{{"--mesh", "data=2", "--spec", "P('model')", "--shape", "4"},
                 "names axis 'model' in dimension 0, which is not in Mesh('data': 2)"},
        BadInput{{"--mesh", "a=2,b=2", "--spec", "P('a', 'a')", "--shape", "4,4"},
                 "axis 'a' is used by dimensions 0 and 1"},
        BadInput{{"--mesh", "a=2", "--spec", "P(None, 'a')", "--shape", "4"},
                 "has 2 entries but the array of shape (4,) has rank 1"},
        BadInput{{"--mesh", "a=4", "--spec", "P('a')", "--shape", "6"},
                 "dimension 0 has size 6, not divisible by 4 shards of ('a') of size 4"},
        BadInput{{"--mesh", "a=4", "--spec", "P(('a', ('b')))", "--shape", "6"},
                 "nested tuples are not allowed"},
        BadInput{{"--mesh", "a=4", "--shape", "6,-2"}, "dimension 1 has size -2"},
        BadInput{{"--mesh", "a=4", "--shape", "4", "--devices", "0,1,2"},
                 "has 4 positions but 3 device ids were given"},
        BadInput{{"--mesh", "a=2", "--shape", "4", "--devices", "1,1"},
                 "device id 1 appears at positions 0 and 1"},
        BadInput{{"--shape", "4"}, "--mesh is required"},
        BadInput{{"--mesh", "a=2", "--shape", "4", "--colour"}, "--colour"}));

TEST(Cli, HelpGoesToStdoutWithStatus0) {
  Result r = run_command({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("layout"));
  r = run_command({"layout", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("--uneven"));
}

TEST(Cli, MissingOrUnknownCommandIsBadInput) {
  Result r = run_command({});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("subcommand is required"));
  r = run_command({"frobnicate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("frobnicate"));
}

}  // namespace
}  // namespace shardwise::cli

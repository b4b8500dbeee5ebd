#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace shardwise::cli {
namespace {

using ::testing::HasSubstr;
using testing::run_command;

TEST(ScheduleCommand, DrawsOneFOneB) {
  const auto r =
      run_command({"schedule", "--stages", "4", "--microbatches", "8", "--schedule", "1f1b"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "schedule      1f1b, 4 stages, 8 micro-batches\n"
            "bubble        0.375 counted, 0.375 = (p - 1) / m\n"
            "in flight     4, 3, 2, 1 micro-batches at most, per stage\n"
            "\n"
            "stage 0 | F0  F1  F2  F3  .   .   .   B0  F4  B1  F5  B2  F6  B3  F7  B4  .   B5  .   "
            "B6  .   B7\n"
            "stage 1 | .   F0  F1  F2  .   .   B0  F3  B1  F4  B2  F5  B3  F6  B4  F7  B5  .   B6  "
            ".   B7  .\n"
            "stage 2 | .   .   F0  F1  .   B0  F2  B1  F3  B2  F4  B3  F5  B4  F6  B5  F7  B6  .   "
            "B7  .   .\n"
            "stage 3 | .   .   .   F0  B0  F1  B1  F2  B2  F3  B3  F4  B4  F5  B5  F6  B6  F7  B7  "
            ".   .   .\n");
}

TEST(ScheduleCommand, InterleavedJson) {
  const auto r = run_command({"schedule", "--stages", "2", "--microbatches", "4", "--schedule",
                              "interleaved", "--virtual", "2", "--backward-time", "2", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["virtual_stages"], 2);
  EXPECT_DOUBLE_EQ(json["bubble_fraction"].get<double>(), 1.0 / 8);
  EXPECT_DOUBLE_EQ(json["counted_bubble_fraction"].get<double>(), 1.0 / 8);
  EXPECT_EQ(json["timeline"].size(), 2u);
  EXPECT_EQ(json["timeline"][0].size(), 16u);
  EXPECT_EQ(json["timeline"][0][0],
            nlohmann::json::parse(
                R"({"pass": "forward", "microbatch": 0, "chunk": 0, "start": 0.0, "end": 0.5})"));
}

TEST(ScheduleCommand, BadInput) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--stages", "4", "--microbatches", "8", "--schedule", "zb"},
            "schedule 'zb' is not one of"},
           {{"--stages", "0", "--microbatches", "8"}, "stages is 0"},
           {{"--stages", "4", "--microbatches", "6", "--schedule", "interleaved"},
            "micro-batches (6) to be a multiple of stages (4)"},
           {{"--stages", "4", "--microbatches", "8", "--forward-time", "0"},
            "pass times must be positive"},
           {{"--stages", "x", "--microbatches", "8"}, "--stages"},
       }) {
    std::vector<std::string> full{"schedule"};
    full.insert(full.end(), args.begin(), args.end());
    testing::expect_bad_input(full, message);
  }
}

}  // namespace
}  // namespace shardwise::cli

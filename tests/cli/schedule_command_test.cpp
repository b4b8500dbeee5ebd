#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

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

TEST(ScheduleCommand, LabelsKeepEveryDigitAndChunkLetter) {
  auto r = run_command({"schedule", "--stages", "2", "--microbatches", "102"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(" F100 B99  F101 B100 .    B101\n"));
  r = run_command({"schedule", "--stages", "2", "--microbatches", "12", "--schedule", "interleaved",
                   "--virtual", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(" F10a "));
  EXPECT_THAT(r.out, HasSubstr(" F10b "));
  // Past 26 chunks the letters go on as aa, ab, ...
  r = run_command({"schedule", "--stages", "2", "--microbatches", "2", "--schedule", "interleaved",
                   "--virtual", "28"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(" F1ab "));
  EXPECT_THAT(r.out, HasSubstr("F0z "));
}

TEST(ScheduleCommand, FractionalTimesDrawEvenCells) {
  const auto r = run_command({"schedule", "--stages", "2", "--microbatches", "2", "--forward-time",
                              "1", "--backward-time", "1.5"});
  ASSERT_EQ(r.status, 0) << r.err;
  // A step of 0.5: forwards span 2 steps, backwards 3, every cell of a kind alike.
  EXPECT_THAT(r.out, HasSubstr("stage 0 | F0  F1  . . . B0    . . B1\n"
                               "stage 1 | . . F0  B0    F1  B1    . . .\n"));
}

TEST(ScheduleCommand, HugeTimelinesAreSummarised) {
  const auto r =
      run_command({"schedule", "--stages", "4", "--microbatches", "8", "--forward-time", "0.001"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("timeline not drawn: 11011 time steps on 4 stages exceed the "
                               "drawing's 4096 steps and 256 stages; --json lists every pass\n"));
  const auto json = run_command(
      {"schedule", "--stages", "4", "--microbatches", "8", "--forward-time", "0.001", "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  // The critical path: 8 micro-batches and 3 more stages, each a backward of 1 and a forward
  // of 0.001.
  EXPECT_NEAR(nlohmann::json::parse(json.out)["makespan"].get<double>(), 11.011, 1e-9);
}

TEST(ScheduleCommand, BadInput) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--stages", "4", "--microbatches", "8", "--schedule", "zb"},
            "schedule 'zb' is not one of"},
           {{"--stages", "0", "--microbatches", "8"}, "stages is 0"},
           {{"--stages", "4", "--microbatches", "6", "--schedule", "interleaved"},
            "micro-batches (6) to be a multiple of stages (4)"},
           {{"--stages", "4", "--microbatches", "8", "--forward-time", "0"},
            "forward pass time is 0; pass times must be positive and finite"},
           {{"--stages", "4", "--microbatches", "8", "--forward-time", "inf"},
            "--forward-time is 'inf'; expected a finite number"},
           {{"--stages", "4", "--microbatches", "8", "--backward-time", "inf"},
            "--backward-time is 'inf'; expected a finite number"},
           {{"--stages", "4", "--microbatches", "8", "--forward-time", "1e999"},
            "--forward-time is '1e999'; expected a finite number"},
           {{"--stages", "4", "--microbatches", "8", "--forward-time", "nan"},
            "--forward-time is 'nan'"},
           {{"--stages", "4", "--microbatches", "8", "--forward-time", "2x"},
            "--forward-time is '2x'"},
           {{"--stages", "4", "--microbatches", "8", "--forward-time", "1e-300"},
            "forward pass time is 1e-300; expected 1e-09 to 1e+09"},
           {{"--stages", "4", "--microbatches", "8", "--virtual", "-1"},
            "--virtual is -1; expected at least 1"},
           {{"--stages", "4", "--microbatches", "8", "--virtual", "-3", "--schedule",
             "interleaved"},
            "--virtual is -3"},
           {{"--stages", "4", "--microbatches", "8", "--virtual", "0"}, "--virtual is 0"},
           {{"--stages", "4", "--microbatches", "8", "--virtual", "1000000000", "--schedule",
             "interleaved"},
            "virtual stages is 1000000000; expected 1 to 64"},
           {{"--stages", "4", "--microbatches", "1000000000"},
            "micro-batches is 1000000000; expected 1 to 65536"},
           {{"--stages", "1000000", "--microbatches", "8"},
            "stages is 1000000; expected 1 to 1024"},
           {{"--stages", "12345678901234567890", "--microbatches", "8"},
            "--stages is '12345678901234567890'; expected an integer of at most 64 bits"},
           {{"--stages", "", "--microbatches", "8"}, "--stages is ''"},
           {{"--stages", "1024", "--microbatches", "65536"},
            "1024 stages x 65536 micro-batches x 1 chunks make 134217728 passes; at most 1048576"},
           {{"--stages", "x", "--microbatches", "8"}, "--stages"},
       }) {
    std::vector<std::string> full{"schedule"};
    full.insert(full.end(), args.begin(), args.end());
    testing::expect_bad_input(full, message);
  }
}

// What ran, drawn like what was predicted: `train --timeline` writes every rank's passes of the
// last step; `schedule --from` draws the file, and reads `schedule --json`'s predictions alike.
TEST(ScheduleCommand, DrawsWhatRanAndWhatWasPredictedFromFiles) {
  const std::string ran = ::testing::TempDir() + "ran_timeline.json";
  const auto trained =
      run_command({"train", "--model", "tiny", "--mesh", "data=2,pipeline=2", "--microbatches", "4",
                   "--batch", "8", "--steps", "2", "--json", "--timeline", ran});
  ASSERT_EQ(trained.status, 0) << trained.err;
  const auto file = nlohmann::json::parse(std::ifstream(ran));
  EXPECT_EQ(file["schedule"], "1f1b");
  EXPECT_EQ(file["ranks"].size(), 4U);
  for (const auto& rank : file["ranks"]) {
    // 1F1B: every stage runs each micro-batch's forward and backward, in the schedule's order.
    EXPECT_EQ(rank["actions"].size(), 8U);
    double last_end = 0;
    for (const auto& action : rank["actions"]) {
      EXPECT_GE(action["start"].get<double>(), last_end);
      EXPECT_GE(action["end"].get<double>(), action["start"].get<double>());
      last_end = action["end"].get<double>();
    }
  }
  const auto drawn = run_command({"schedule", "--from", ran});
  ASSERT_EQ(drawn.status, 0) << drawn.err;
  EXPECT_THAT(drawn.out, HasSubstr("schedule      1f1b, 2 stages, 4 micro-batches, as it ran\n"));
  EXPECT_THAT(drawn.out, HasSubstr(" measured, 0.25 = (p - 1) / m\n"));
  // The rows' cells follow the measured times, which a loaded machine stretches unevenly: the
  // rows and the first forward are asserted, not the columns it lands in.
  EXPECT_THAT(drawn.out, HasSubstr("stage 0 | "));
  EXPECT_THAT(drawn.out, HasSubstr("stage 1 | "));
  EXPECT_THAT(drawn.out, HasSubstr("F0"));
  // A prediction's JSON draws as the prediction itself.
  const auto predicted =
      run_command({"schedule", "--stages", "4", "--microbatches", "8", "--json"});
  const std::string plan = ::testing::TempDir() + "predicted_timeline.json";
  std::ofstream(plan) << predicted.out;
  const auto replayed = run_command({"schedule", "--from", plan});
  ASSERT_EQ(replayed.status, 0) << replayed.err;
  const auto direct = run_command({"schedule", "--stages", "4", "--microbatches", "8"});
  const auto rows = [](const std::string& out) { return out.substr(out.find("stage 0 |")); };
  EXPECT_EQ(rows(replayed.out), rows(direct.out));
  EXPECT_THAT(replayed.out, HasSubstr("0.375 counted, 0.375 = (p - 1) / m"));
}

TEST(ScheduleCommand, BadTimelineFilesAreNamed) {
  const auto bad = [](const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string header =
      R"({"schedule": "1f1b", "stages": 2, "microbatches": 1, "virtual_stages": 1, )";
  const std::string f0 =
      R"({"pass": "forward", "microbatch": 0, "chunk": 0, "start": 0, "end": 1})";
  const std::string b0 =
      R"({"pass": "backward", "microbatch": 0, "chunk": 0, "start": 3, "end": 4})";
  const std::string swapped = bad("swapped.json", header + R"("timeline": [[)" + b0 + ", " + f0 +
                                                      "], [" + f0 + ", " + b0 + "]]}");
  testing::expect_bad_input(
      {"schedule", "--from", swapped},
      "--from '" + swapped + "': timeline stage 0 pass 0 is B0; the 1f1b schedule runs F0 there");
  const std::string one_stage =
      bad("one_stage.json", header + R"("timeline": [[)" + f0 + ", " + b0 + "]]}");
  testing::expect_bad_input({"schedule", "--from", one_stage},
                            "timeline holds 1 stages; the header says 2");
  const std::string negative =
      bad("negative.json",
          header + R"("timeline": [[)" + f0 + ", " + b0 +
              R"(], [{"pass": "forward", "microbatch": 0, "chunk": 0, "start": -1, "end": 1}, )" +
              b0 + "]]}");
  testing::expect_bad_input({"schedule", "--from", negative},
                            "timeline stage 1 pass 0: start is -1; expected a time from 0");
  const std::string backwards =
      bad("backwards.json",
          header + R"("timeline": [[)" + f0 + ", " + b0 +
              R"(], [{"pass": "forward", "microbatch": 0, "chunk": 0, "start": 2, "end": 1}, )" +
              b0 + "]]}");
  testing::expect_bad_input({"schedule", "--from", backwards},
                            "timeline stage 1 pass 0 ends at 1, before its start 2");
  testing::expect_bad_input({"schedule", "--from", swapped, "--stages", "2"},
                            "--stages describes a schedule to predict; --from draws the file's");
  testing::expect_bad_input({"schedule", "--from", "/dev/zero"}, "is not a regular file");
  const std::string overflow = bad(
      "overflow.json",
      header +
          R"("timeline": [[{"pass": "forward", "microbatch": 0, "chunk": 0, "start": 0, "end": 1e400}]]})");
  testing::expect_bad_input(
      {"schedule", "--from", overflow},
      "shardwise schedule: invalid JSON in --from '" + overflow + "': number overflow");
  // A backward a billion billion forwards long: too wide to draw, said with a number.
  const std::string lopsided = bad(
      "lopsided.json",
      R"({"schedule": "1f1b", "stages": 1, "microbatches": 1, "timeline": [[{"pass": "forward", "microbatch": 0, "start": 0, "end": 1e-300}, {"pass": "backward", "microbatch": 0, "start": 1e-300, "end": 1e9}]]})");
  const auto drawn = run_command({"schedule", "--from", lopsided});
  ASSERT_EQ(drawn.status, 0) << drawn.err;
  EXPECT_THAT(drawn.out, HasSubstr("timeline not drawn: 1e+12 time steps"));
  testing::expect_bad_input({"schedule", "--microbatches", "2"},
                            "--stages is required (or --from FILE)");
  const testing::Result unwritable = run_command({"train", "--mesh", "pipeline=2", "--steps", "50",
                                                  "--timeline", "/nonexistent/folder/t.json"});
  EXPECT_EQ(unwritable.status, 2);
  EXPECT_EQ(unwritable.err,
            "shardwise train: --timeline '/nonexistent/folder/t.json': the folder "
            "'/nonexistent/folder' does not exist\n");
  EXPECT_EQ(unwritable.out.find("step "), std::string::npos) << "trained before refusing";
  testing::expect_bad_input({"train", "--timeline", "x.json"},
                            "--timeline writes the pipeline's executed schedule; --mesh "
                            "Mesh('data': 1) has no pipeline axis");
}

}  // namespace
}  // namespace shardwise::cli

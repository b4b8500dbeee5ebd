#include "shardwise/strategy/pipeline_schedule.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "error_of.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

struct Case {
  ScheduleKind kind;
  std::int64_t stages;
  std::int64_t microbatches;
  std::int64_t virtual_stages;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (std::int64_t p = 1; p <= 6; ++p) {
    for (std::int64_t m = 1; m <= 12; ++m) {
      cases.push_back({ScheduleKind::kGPipe, p, m, 1});
      cases.push_back({ScheduleKind::kOneFOneB, p, m, 1});
      if (m % p == 0) {
        for (std::int64_t v = 2; v <= 3; ++v)
          cases.push_back({ScheduleKind::kInterleaved1F1B, p, m, v});
      }
    }
  }
  return cases;
}

std::string describe(const Case& c) {
  return to_string(c.kind) + " p=" + std::to_string(c.stages) +
         " m=" + std::to_string(c.microbatches) + " v=" + std::to_string(c.virtual_stages);
}

TEST(PipelineSchedule, EveryPassOnceAndForwardBeforeBackward) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(describe(c));
    const PipelineSchedule schedule =
        build_schedule(c.kind, c.stages, c.microbatches, c.virtual_stages);
    ASSERT_EQ(static_cast<std::int64_t>(schedule.actions.size()), c.stages);
    for (const auto& actions : schedule.actions) {
      ASSERT_EQ(static_cast<std::int64_t>(actions.size()), 2 * c.microbatches * c.virtual_stages);
      std::set<std::pair<std::int64_t, std::int64_t>> forwarded;
      std::set<std::pair<std::int64_t, std::int64_t>> backwarded;
      for (const PipelineAction& a : actions) {
        ASSERT_GE(a.microbatch, 0);
        ASSERT_LT(a.microbatch, c.microbatches);
        ASSERT_GE(a.chunk, 0);
        ASSERT_LT(a.chunk, c.virtual_stages);
        const auto key = std::make_pair(a.microbatch, a.chunk);
        if (a.pass == Pass::kForward) {
          EXPECT_TRUE(forwarded.insert(key).second);
        } else {
          EXPECT_TRUE(forwarded.count(key)) << "backward before forward";
          EXPECT_TRUE(backwarded.insert(key).second);
        }
      }
    }
  }
}

// Checks the timeline against the data dependencies, independently of the simulator.
void expect_dependencies_hold(const PipelineSchedule& schedule, const PipelineTimeline& timeline) {
  std::map<std::tuple<Pass, std::int64_t, std::int64_t>, std::pair<double, double>> when;
  for (std::size_t s = 0; s < timeline.stages.size(); ++s) {
    double previous_end = 0;
    for (const TimedAction& t : timeline.stages[s]) {
      EXPECT_GE(t.start, previous_end) << "a stage runs one pass at a time";
      previous_end = t.end;
      when[{t.action.pass, schedule.virtual_stage(static_cast<std::int64_t>(s), t.action.chunk),
            t.action.microbatch}] = {t.start, t.end};
    }
  }
  const std::int64_t last = schedule.num_stages * schedule.virtual_stages - 1;
  for (const auto& [key, interval] : when) {
    const auto [pass, vs, mb] = key;
    if (pass == Pass::kForward && vs > 0) {
      EXPECT_LE(when.at({Pass::kForward, vs - 1, mb}).second, interval.first);
    }
    if (pass == Pass::kBackward) {
      EXPECT_LE(when.at({Pass::kForward, vs, mb}).second, interval.first);
      if (vs < last) {
        EXPECT_LE(when.at({Pass::kBackward, vs + 1, mb}).second, interval.first);
      }
    }
  }
}

TEST(PipelineSchedule, CountedBubbleMatchesTheFormula) {
  for (const Case& c : all_cases()) {
    const PipelineSchedule schedule =
        build_schedule(c.kind, c.stages, c.microbatches, c.virtual_stages);
    for (const auto& [f, b] : std::vector<std::pair<double, double>>{{1, 1}, {1, 2}}) {
      SCOPED_TRACE(describe(c) + " f=" + std::to_string(f) + " b=" + std::to_string(b));
      const PipelineTimeline timeline = simulate(schedule, f, b);
      expect_dependencies_hold(schedule, timeline);
      EXPECT_NEAR(timeline.bubble_fraction(), schedule.bubble_fraction(), 1e-9);
      const double per_microbatch = f + b;
      EXPECT_NEAR(timeline.makespan,
                  per_microbatch * (c.microbatches + static_cast<double>(c.stages - 1) /
                                                         static_cast<double>(c.virtual_stages)),
                  1e-9);
    }
  }
}

TEST(PipelineSchedule, PeakInFlight) {
  EXPECT_THAT(build_schedule(ScheduleKind::kGPipe, 4, 8).peak_in_flight(), ElementsAre(8, 8, 8, 8));
  EXPECT_THAT(build_schedule(ScheduleKind::kOneFOneB, 4, 8).peak_in_flight(),
              ElementsAre(4, 3, 2, 1));
  EXPECT_THAT(build_schedule(ScheduleKind::kOneFOneB, 4, 2).peak_in_flight(),
              ElementsAre(2, 2, 2, 1));
  // Megatron-LM: 2 (p - s - 1) + (v - 1) p warm-up forwards, plus the one of the first step.
  EXPECT_THAT(build_schedule(ScheduleKind::kInterleaved1F1B, 4, 8, 2).peak_in_flight(),
              ElementsAre(11, 9, 7, 5));
}

TEST(PipelineSchedule, OneFOneBOrder) {
  const PipelineSchedule schedule = build_schedule(ScheduleKind::kOneFOneB, 3, 4);
  std::vector<std::string> stage0;
  for (const auto& a : schedule.actions[0]) stage0.push_back(to_string(a, false));
  EXPECT_THAT(stage0, ElementsAre("F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"));
  std::vector<std::string> stage2;
  for (const auto& a : schedule.actions[2]) stage2.push_back(to_string(a, false));
  EXPECT_THAT(stage2, ElementsAre("F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"));
}

TEST(PipelineSchedule, BubbleFormulas) {
  EXPECT_DOUBLE_EQ(build_schedule(ScheduleKind::kGPipe, 4, 8).bubble_fraction(), 3.0 / 8);
  EXPECT_DOUBLE_EQ(build_schedule(ScheduleKind::kOneFOneB, 4, 8).bubble_fraction(), 3.0 / 8);
  EXPECT_DOUBLE_EQ(build_schedule(ScheduleKind::kInterleaved1F1B, 4, 8, 2).bubble_fraction(),
                   3.0 / 16);
}

TEST(PipelineSchedule, Errors) {
  EXPECT_THAT(error_of([] { (void)build_schedule(ScheduleKind::kOneFOneB, 0, 4); }),
              HasSubstr("stages is 0"));
  EXPECT_THAT(error_of([] { (void)build_schedule(ScheduleKind::kGPipe, 2, 0); }),
              HasSubstr("micro-batches is 0"));
  EXPECT_THAT(error_of([] { (void)build_schedule(ScheduleKind::kInterleaved1F1B, 4, 6, 2); }),
              HasSubstr("micro-batches (6) to be a multiple of stages (4)"));
  EXPECT_THAT(error_of([] { (void)build_schedule(ScheduleKind::kInterleaved1F1B, 4, 8, 1); }),
              HasSubstr("at least 2 virtual stages"));
  EXPECT_THAT(error_of([] { (void)build_schedule(ScheduleKind::kOneFOneB, 4, 8, 2); }),
              HasSubstr("virtual stages is 2, expected 1"));
  EXPECT_THAT(error_of([] { (void)simulate(build_schedule(ScheduleKind::kGPipe, 2, 2), 0, 1); }),
              HasSubstr("pass times must be positive"));
  EXPECT_THAT(error_of([] { (void)parse_schedule_kind("zb"); }),
              HasSubstr("schedule 'zb' is not one of gpipe, 1f1b, interleaved"));
  EXPECT_EQ(parse_schedule_kind("interleaved"), ScheduleKind::kInterleaved1F1B);
}

TEST(PipelineSchedule, DeadlockIsReported) {
  PipelineSchedule broken = build_schedule(ScheduleKind::kGPipe, 2, 1);
  std::swap(broken.actions[0][0], broken.actions[0][1]);  // backward first: waits forever
  EXPECT_THAT(error_of([&] { (void)simulate(broken); }), HasSubstr("deadlocks"));
}

TEST(PipelineSchedule, DrawsTheTimeline) {
  const PipelineSchedule schedule = build_schedule(ScheduleKind::kOneFOneB, 2, 3);
  EXPECT_EQ(draw_timeline(schedule, simulate(schedule)),
            "stage 0 | F0  F1  .   B0  F2  B1  .   B2\n"
            "stage 1 | .   F0  B0  F1  B1  F2  B2  .\n");
}

// A measured pass far shorter than the medians (a first forward on a quiet core) still shows:
// the next pass is drawn after it, not over it.
TEST(PipelineSchedule, AMeasuredPassTooShortToRoundIsNotDrawnOver) {
  const PipelineSchedule schedule = build_schedule(ScheduleKind::kOneFOneB, 2, 3);
  PipelineTimeline timeline = simulate(schedule);
  std::vector<TimedAction>& first = timeline.stages[0];
  first[0].end = first[0].start + 0.01;  // F0 ends long before the grid's next step
  for (std::size_t i = 1; i < first.size(); ++i) {
    first[i].start -= 0.99;
    first[i].end -= 0.99;
  }
  const std::string drawn = draw_timeline(schedule, timeline);
  EXPECT_THAT(drawn, HasSubstr("stage 0 | F0  F1"));
}

}  // namespace
}  // namespace shardwise

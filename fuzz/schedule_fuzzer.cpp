// Pipeline schedules from arbitrary options: built, simulated and drawn, or refused.
#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz_input.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  FuzzedDataProvider input(data, size);
  const auto kind = input.PickValueInArray(
      {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved1F1B});
  // Small counts most of the time (so the schedule is built), any 64-bit value sometimes.
  const auto count = [&](std::int64_t small) {
    return input.ConsumeBool() ? input.ConsumeIntegralInRange<std::int64_t>(-2, small)
                               : input.ConsumeIntegral<std::int64_t>();
  };
  const std::int64_t stages = count(16);
  const std::int64_t microbatches = count(64);
  const std::int64_t chunks = count(8);
  const double forward = input.ConsumeFloatingPoint<double>();
  const double backward = input.ConsumeFloatingPoint<double>();
  fuzz::expect_only_errors([&] {
    const PipelineSchedule schedule = build_schedule(kind, stages, microbatches, chunks);
    const PipelineTimeline timeline = simulate(schedule, forward, backward);
    const std::string drawing = draw_timeline(schedule, timeline);
    fuzz::require(!drawing.empty());
    fuzz::require(timeline.makespan > 0);
  });
  fuzz::expect_only_errors([&] { (void)parse_schedule_kind(input.ConsumeRemainingBytesAsString()); });
  return 0;
}

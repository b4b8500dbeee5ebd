#pragma once
// Pipeline schedules: for every stage, the ordered forward and backward passes of each
// micro-batch (and, interleaved, of each of the stage's model chunks), with the bubble they
// leave. GPipe runs all forwards then all backwards; 1F1B (PipeDream-Flush) alternates after a
// warm-up so at most (stages - stage) micro-batches are in flight; interleaved 1F1B (Megatron-LM)
// gives each device v model chunks and cuts the bubble by v.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise {

enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved1F1B };

// "gpipe", "1f1b", "interleaved".
std::string to_string(ScheduleKind kind);
// Throws ParseError naming the text for anything else.
ScheduleKind parse_schedule_kind(std::string_view text);

enum class Pass { kForward, kBackward };

struct PipelineAction {
  Pass pass = Pass::kForward;
  std::int64_t microbatch = 0;
  // Which of the stage's model chunks (0 .. virtual_stages-1); always 0 without interleaving.
  std::int64_t chunk = 0;
  friend bool operator==(const PipelineAction&, const PipelineAction&) = default;
};

// Bounds on what is scheduled and drawn: beyond them a schedule is refused (simulating it would
// take gigabytes) or its timeline is summarised (the drawing would be unreadable).
inline constexpr std::int64_t kMaxPipelineStages = 1024;
inline constexpr std::int64_t kMaxMicrobatches = 65536;
inline constexpr std::int64_t kMaxVirtualStages = 64;
inline constexpr std::int64_t kMaxSchedulePasses = std::int64_t{1} << 20;
inline constexpr double kMinPassTime = 1e-9;
inline constexpr double kMaxPassTime = 1e9;
inline constexpr std::int64_t kMaxDrawnSteps = 4096;
inline constexpr std::int64_t kMaxDrawnStages = 256;

// "F3", "B0"; with chunks "F3b" (chunk 1): chunks are a..z, then aa, ab, ...
std::string to_string(const PipelineAction& action, bool with_chunk);

struct PipelineSchedule {
  ScheduleKind kind = ScheduleKind::kOneFOneB;
  std::int64_t num_stages = 1;
  std::int64_t num_microbatches = 1;
  std::int64_t virtual_stages = 1;
  // Per stage, the passes in the order the stage runs them.
  std::vector<std::vector<PipelineAction>> actions;

  // The model chunk a (stage, chunk) runs: chunk * num_stages + stage.
  [[nodiscard]] std::int64_t virtual_stage(std::int64_t stage, std::int64_t chunk) const;
  // Per stage, the most micro-batch chunks forwarded and not yet backwarded at any time.
  [[nodiscard]] std::vector<std::int64_t> peak_in_flight() const;
  // The published bubble fraction: (p - 1) / m, and (p - 1) / (v m) interleaved.
  [[nodiscard]] double bubble_fraction() const;
};

// Throws InvalidArgument for stages, micro-batches or virtual stages outside their bounds
// (above), more than kMaxSchedulePasses passes, virtual_stages other than 1 for GPipe and 1F1B
// (or < 2 for interleaved), and, interleaved, micro-batches not a multiple of the stages
// (Megatron-LM's requirement).
PipelineSchedule build_schedule(ScheduleKind kind, std::int64_t num_stages,
                                std::int64_t num_microbatches, std::int64_t virtual_stages = 1);

struct TimedAction {
  PipelineAction action;
  double start = 0;
  double end = 0;
};

// The schedule run with fixed pass times (a chunk's pass takes time / virtual_stages), each
// pass starting as soon as its stage is free and its inputs exist: the previous model chunk's
// forward of the same micro-batch; for a backward, its own forward and the next chunk's
// backward.
struct PipelineTimeline {
  std::vector<std::vector<TimedAction>> stages;
  double forward_time = 1;
  double backward_time = 1;
  double makespan = 0;
  // (makespan - busy time) / busy time of a stage, counted.
  [[nodiscard]] double bubble_fraction() const;
};

// Throws InvalidArgument for times that are not finite or outside [kMinPassTime, kMaxPassTime],
// and ShardingError when the order deadlocks.
PipelineTimeline simulate(const PipelineSchedule& schedule, double forward_time = 1,
                          double backward_time = 1);

// One row per stage, one column per time step (a step both pass times are whole multiples of,
// so cells of one kind of pass have one width), each pass labelled with every digit of its
// micro-batch and its chunk letters, cells widened to fit. Past kMaxDrawnSteps steps or
// kMaxDrawnStages stages, one line saying so instead.
std::string draw_timeline(const PipelineSchedule& schedule, const PipelineTimeline& timeline);

}  // namespace shardwise

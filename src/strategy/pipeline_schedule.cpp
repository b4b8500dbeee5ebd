#include "shardwise/strategy/pipeline_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using Actions = std::vector<PipelineAction>;

PipelineAction forward(std::int64_t microbatch, std::int64_t chunk = 0) {
  return {Pass::kForward, microbatch, chunk};
}
PipelineAction backward(std::int64_t microbatch, std::int64_t chunk = 0) {
  return {Pass::kBackward, microbatch, chunk};
}

Actions gpipe(std::int64_t microbatches) {
  Actions actions;
  for (std::int64_t m = 0; m < microbatches; ++m) actions.push_back(forward(m));
  for (std::int64_t m = 0; m < microbatches; ++m) actions.push_back(backward(m));
  return actions;
}

// PipeDream-Flush: warm up with (stages - stage - 1) forwards, alternate, then drain.
Actions one_f_one_b(std::int64_t stage, std::int64_t stages, std::int64_t microbatches) {
  const std::int64_t warmup = std::min(stages - stage - 1, microbatches);
  Actions actions;
  for (std::int64_t m = 0; m < warmup; ++m) actions.push_back(forward(m));
  for (std::int64_t m = warmup; m < microbatches; ++m) {
    actions.push_back(forward(m));
    actions.push_back(backward(m - warmup));
  }
  for (std::int64_t m = microbatches - warmup; m < microbatches; ++m)
    actions.push_back(backward(m));
  return actions;
}

// Megatron-LM's interleaved order: the k-th pass of a stage works on micro-batch
// (k / (p v)) p + k % p of chunk (k / p) % v (backwards walk the chunks in reverse). The
// warm-up runs 2 (p - stage - 1) + (v - 1) p forwards.
Actions interleaved(std::int64_t stage, std::int64_t stages, std::int64_t microbatches,
                    std::int64_t chunks) {
  const std::int64_t total = microbatches * chunks;
  const std::int64_t group = stages * chunks;
  auto nth = [&](std::int64_t k, Pass pass) {
    std::int64_t chunk = (k % group) / stages;
    if (pass == Pass::kBackward) chunk = chunks - 1 - chunk;
    return PipelineAction{pass, (k / group) * stages + k % stages, chunk};
  };
  const std::int64_t warmup = std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, total);
  Actions actions;
  for (std::int64_t k = 0; k < warmup; ++k) actions.push_back(nth(k, Pass::kForward));
  for (std::int64_t k = warmup; k < total; ++k) {
    actions.push_back(nth(k, Pass::kForward));
    actions.push_back(nth(k - warmup, Pass::kBackward));
  }
  for (std::int64_t k = total - warmup; k < total; ++k) actions.push_back(nth(k, Pass::kBackward));
  return actions;
}

// Shortest text for a number: "1e+999" never appears (callers reject non-finite input first),
// "0.5", "1e-300".
std::string number_text(double value) {
  std::ostringstream out;
  out << std::setprecision(6) << value;
  return out.str();
}

// A drawing step that both pass times are whole multiples of, when one exists with the
// shorter pass at most kMaxStepsPerPass steps long; else the shorter pass time (cells then
// round to the nearest step).
struct TimeGrid {
  double step = 1;
  std::size_t forward_steps = 1;
  std::size_t backward_steps = 1;
};

constexpr std::int64_t kMaxStepsPerPass = 64;

TimeGrid time_grid(double forward, double backward) {
  const double shortest = std::min(forward, backward);
  for (std::int64_t parts = 1; parts <= kMaxStepsPerPass; ++parts) {
    const double step = shortest / static_cast<double>(parts);
    const double f = forward / step;
    const double b = backward / step;
    if (std::abs(f - std::round(f)) <= 1e-9 * f && std::abs(b - std::round(b)) <= 1e-9 * b &&
        std::max(f, b) <= static_cast<double>(kMaxDrawnSteps)) {
      return {step, static_cast<std::size_t>(std::llround(f)),
              static_cast<std::size_t>(std::llround(b))};
    }
  }
  const auto steps = [&](double time) {
    return static_cast<std::size_t>(
        std::max(1.0, std::min(std::round(time / shortest), double(kMaxDrawnSteps))));
  };
  return {shortest, steps(forward), steps(backward)};
}

}  // namespace

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kInterleaved1F1B: return "interleaved";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(std::string_view text) {
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved1F1B}) {
    if (text == to_string(kind)) return kind;
  }
  throw ParseError("schedule '" + echo_input(text) + "' is not one of gpipe, 1f1b, interleaved");
}

std::string chunk_letters(std::int64_t chunk) {
  // Bijective base 26: a..z, aa, ab, ...
  std::string letters;
  for (std::int64_t n = chunk + 1; n > 0; n = (n - 1) / 26) {
    letters.insert(letters.begin(), static_cast<char>('a' + (n - 1) % 26));
  }
  return letters;
}

std::string to_string(const PipelineAction& action, bool with_chunk) {
  std::string text(1, action.pass == Pass::kForward ? 'F' : 'B');
  text += std::to_string(action.microbatch);
  if (with_chunk) text += chunk_letters(action.chunk);
  return text;
}

std::int64_t PipelineSchedule::virtual_stage(std::int64_t stage, std::int64_t chunk) const {
  return chunk * num_stages + stage;
}

std::vector<std::int64_t> PipelineSchedule::peak_in_flight() const {
  std::vector<std::int64_t> peaks;
  for (const Actions& stage_actions : actions) {
    std::int64_t in_flight = 0;
    std::int64_t peak = 0;
    for (const PipelineAction& action : stage_actions) {
      in_flight += action.pass == Pass::kForward ? 1 : -1;
      peak = std::max(peak, in_flight);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

double PipelineSchedule::bubble_fraction() const {
  return static_cast<double>(num_stages - 1) /
         static_cast<double>(virtual_stages * num_microbatches);
}

PipelineSchedule build_schedule(ScheduleKind kind, std::int64_t num_stages,
                                std::int64_t num_microbatches, std::int64_t virtual_stages) {
  if (num_stages < 1 || num_stages > kMaxPipelineStages) {
    throw InvalidArgument("stages is " + std::to_string(num_stages) + "; expected 1 to " +
                          std::to_string(kMaxPipelineStages));
  }
  if (num_microbatches < 1 || num_microbatches > kMaxMicrobatches) {
    throw InvalidArgument("micro-batches is " + std::to_string(num_microbatches) +
                          "; expected 1 to " + std::to_string(kMaxMicrobatches));
  }
  if (virtual_stages < 1 || virtual_stages > kMaxVirtualStages) {
    throw InvalidArgument("virtual stages is " + std::to_string(virtual_stages) +
                          "; expected 1 to " + std::to_string(kMaxVirtualStages));
  }
  // Each factor is bounded above, so the product cannot overflow.
  const std::int64_t passes = 2 * num_stages * num_microbatches * virtual_stages;
  if (passes > kMaxSchedulePasses) {
    throw InvalidArgument(std::to_string(num_stages) + " stages x " +
                          std::to_string(num_microbatches) + " micro-batches x " +
                          std::to_string(virtual_stages) + " chunks make " +
                          std::to_string(passes) + " passes; at most " +
                          std::to_string(kMaxSchedulePasses) + " are scheduled");
  }
  if (kind == ScheduleKind::kInterleaved1F1B) {
    if (virtual_stages < 2) {
      throw InvalidArgument("interleaved 1F1B needs at least 2 virtual stages per device, got " +
                            std::to_string(virtual_stages));
    }
    if (num_microbatches % num_stages != 0) {
      throw InvalidArgument("interleaved 1F1B needs micro-batches (" +
                            std::to_string(num_microbatches) + ") to be a multiple of stages (" +
                            std::to_string(num_stages) + ")");
    }
  } else if (virtual_stages != 1) {
    throw InvalidArgument(to_string(kind) + " runs one model chunk per device; virtual stages is " +
                          std::to_string(virtual_stages) + ", expected 1 (or use interleaved)");
  }
  PipelineSchedule schedule{kind, num_stages, num_microbatches, virtual_stages, {}};
  for (std::int64_t s = 0; s < num_stages; ++s) {
    switch (kind) {
      case ScheduleKind::kGPipe: schedule.actions.push_back(gpipe(num_microbatches)); break;
      case ScheduleKind::kOneFOneB:
        schedule.actions.push_back(one_f_one_b(s, num_stages, num_microbatches));
        break;
      case ScheduleKind::kInterleaved1F1B:
        schedule.actions.push_back(interleaved(s, num_stages, num_microbatches, virtual_stages));
        break;
    }
  }
  return schedule;
}

double PipelineTimeline::bubble_fraction() const {
  if (stages.empty()) return 0;
  double busy = 0;
  for (const TimedAction& timed : stages.front()) busy += timed.end - timed.start;
  return busy > 0 ? (makespan - busy) / busy : 0;
}

PipelineTimeline simulate(const PipelineSchedule& schedule, double forward_time,
                          double backward_time) {
  for (const auto& [what, time] :
       {std::pair{"forward", forward_time}, {"backward", backward_time}}) {
    if (!std::isfinite(time) || time <= 0) {
      throw InvalidArgument(std::string(what) + " pass time is " + number_text(time) +
                            "; pass times must be positive and finite");
    }
    if (time < kMinPassTime || time > kMaxPassTime) {
      throw InvalidArgument(std::string(what) + " pass time is " + number_text(time) +
                            "; expected " + number_text(kMinPassTime) + " to " +
                            number_text(kMaxPassTime));
    }
  }
  const auto chunks = static_cast<double>(schedule.virtual_stages);
  const std::int64_t last = schedule.num_stages * schedule.virtual_stages - 1;
  // When each (pass, virtual stage, micro-batch) finished.
  std::map<std::tuple<Pass, std::int64_t, std::int64_t>, double> finished;
  PipelineTimeline timeline;
  timeline.forward_time = forward_time;
  timeline.backward_time = backward_time;
  timeline.stages.resize(schedule.actions.size());
  std::vector<std::size_t> next(schedule.actions.size(), 0);
  std::vector<double> free_at(schedule.actions.size(), 0.0);
  std::size_t remaining = 0;
  for (const Actions& actions : schedule.actions) remaining += actions.size();

  while (remaining > 0) {
    bool progressed = false;
    for (std::size_t s = 0; s < schedule.actions.size(); ++s) {
      while (next[s] < schedule.actions[s].size()) {
        const PipelineAction& action = schedule.actions[s][next[s]];
        const std::int64_t vs = schedule.virtual_stage(static_cast<std::int64_t>(s), action.chunk);
        std::vector<std::tuple<Pass, std::int64_t, std::int64_t>> inputs;
        if (action.pass == Pass::kForward) {
          if (vs > 0) inputs.emplace_back(Pass::kForward, vs - 1, action.microbatch);
        } else {
          inputs.emplace_back(Pass::kForward, vs, action.microbatch);
          if (vs < last) inputs.emplace_back(Pass::kBackward, vs + 1, action.microbatch);
        }
        double start = free_at[s];
        bool ready = true;
        for (const auto& input : inputs) {
          auto it = finished.find(input);
          if (it == finished.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready) break;
        const double duration =
            (action.pass == Pass::kForward ? forward_time : backward_time) / chunks;
        finished[{action.pass, vs, action.microbatch}] = start + duration;
        timeline.stages[s].push_back({action, start, start + duration});
        free_at[s] = start + duration;
        timeline.makespan = std::max(timeline.makespan, start + duration);
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      throw ShardingError("the " + to_string(schedule.kind) +
                          " schedule deadlocks: no stage can run its next pass");
    }
  }
  return timeline;
}

std::string draw_timeline(const PipelineSchedule& schedule, const PipelineTimeline& timeline) {
  const auto chunks = static_cast<double>(schedule.virtual_stages);
  const TimeGrid grid = time_grid(timeline.forward_time / chunks, timeline.backward_time / chunks);
  const double steps = timeline.makespan / grid.step;
  if (steps > static_cast<double>(kMaxDrawnSteps) ||
      timeline.stages.size() > static_cast<std::size_t>(kMaxDrawnStages)) {
    return "timeline not drawn: " + number_text(std::round(steps)) + " time steps on " +
           std::to_string(timeline.stages.size()) + " stages exceed the drawing's " +
           std::to_string(kMaxDrawnSteps) + " steps and " + std::to_string(kMaxDrawnStages) +
           " stages; --json lists every pass\n";
  }
  const bool with_chunks = schedule.virtual_stages > 1;
  std::size_t widest_label = 0;
  for (const auto& stage : timeline.stages) {
    for (const TimedAction& timed : stage) {
      widest_label = std::max(widest_label, to_string(timed.action, with_chunks).size());
    }
  }
  // Every pass spans a whole number of steps; the shortest is at least 4 characters wide and
  // holds the widest label and a space.
  const std::size_t shortest = std::min(grid.forward_steps, grid.backward_steps);
  const std::size_t cell =
      std::max((widest_label + shortest) / shortest, (3 + shortest) / shortest);
  const auto columns = static_cast<std::size_t>(std::llround(steps));
  const auto column_of = [&](double time) {
    return static_cast<std::size_t>(std::llround(time / grid.step)) * cell;
  };
  std::string out;
  for (std::size_t s = 0; s < timeline.stages.size(); ++s) {
    std::string row(columns * cell, ' ');
    for (std::size_t c = 0; c < columns; ++c) row[c * cell] = '.';
    // A pass starts where the one before it on the stage was drawn to: a measured pass far
    // shorter than the medians rounds to no width, and would be drawn over by the next.
    std::size_t drawn_to = 0;
    for (const TimedAction& timed : timeline.stages[s]) {
      const std::size_t begin = std::max(column_of(timed.start), drawn_to);
      const std::size_t end = std::max(column_of(timed.end), begin + cell);
      drawn_to = end;
      if (row.size() < end) row.resize(end, ' ');
      std::string label = to_string(timed.action, with_chunks);
      label.resize(end - begin - 1, ' ');
      row.replace(begin, end - begin - 1, label);
      row[end - 1] = ' ';
    }
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += "stage " + std::to_string(s) + " | " + row + "\n";
  }
  return out;
}

}  // namespace shardwise

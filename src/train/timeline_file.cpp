#include "shardwise/train/timeline_file.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "../detail/json_reader.hpp"
#include "../detail/text_format.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

TimelineFile read_timeline(const std::string& text, const std::string& path) {
  const std::string what = "--from '" + echo_input(path) + "'";
  try {
    const nlohmann::json json = detail::parse_json(text, what);
    detail::JsonObjectReader reader(json, "");
    const ScheduleKind kind = parse_schedule_kind(reader.required_string("schedule"));
    const std::int64_t stages = reader.required_integer("stages");
    const std::int64_t microbatches = reader.required_integer("microbatches");
    const std::int64_t chunks = reader.integer("virtual_stages", 1);
    TimelineFile file;
    file.measured = reader.boolean("measured", false);
    // What `schedule --json` adds about the prediction: recomputed here, so only read.
    for (const char* derived :
         {"bubble_fraction", "counted_bubble_fraction", "makespan", "peak_in_flight", "ranks"}) {
      (void)reader.optional(derived);
    }
    file.schedule = build_schedule(kind, stages, microbatches, chunks);
    const nlohmann::json& timeline = reader.required("timeline");
    reader.finish();
    if (!timeline.is_array() || timeline.size() != static_cast<std::size_t>(stages)) {
      throw InvalidArgument(
          "timeline holds " +
          std::string(timeline.is_array() ? std::to_string(timeline.size()) : "no list of") +
          " stages; the header says " + std::to_string(stages));
    }
    std::vector<double> forwards;
    std::vector<double> backwards;
    for (std::int64_t s = 0; s < stages; ++s) {
      const auto& expected = file.schedule.actions[static_cast<std::size_t>(s)];
      const nlohmann::json& passes = timeline[static_cast<std::size_t>(s)];
      if (!passes.is_array() || passes.size() != expected.size()) {
        throw InvalidArgument("timeline stage " + std::to_string(s) + " holds " +
                              (passes.is_array() ? std::to_string(passes.size()) : "no list of") +
                              " passes; the " + to_string(kind) + " schedule runs " +
                              std::to_string(expected.size()) + " there");
      }
      std::vector<TimedAction> stage;
      for (std::size_t a = 0; a < expected.size(); ++a) {
        const std::string where =
            "timeline stage " + std::to_string(s) + " pass " + std::to_string(a);
        detail::JsonObjectReader pass(passes[a], where);
        const std::string kind_text = pass.required_string("pass");
        PipelineAction action;
        action.pass = kind_text == "forward" ? Pass::kForward : Pass::kBackward;
        if (kind_text != "forward" && kind_text != "backward") {
          throw InvalidArgument(where + ": pass is '" + echo_input(kind_text) +
                                "'; expected forward or backward");
        }
        action.microbatch = pass.required_integer("microbatch");
        action.chunk = pass.integer("chunk", 0);
        const auto time = [&](const char* key) {
          const nlohmann::json& value = pass.required(key);
          const double t = value.is_number() ? value.get<double>() : -1;
          if (!value.is_number() || !std::isfinite(t) || t < 0 || t > kMaxPassTime) {
            throw InvalidArgument(where + ": " + key + " is " + value.dump() +
                                  "; expected a time from 0 to " +
                                  shardwise::detail::significant(kMaxPassTime, 6));
          }
          return t;
        };
        const double start = time("start");
        const double end = time("end");
        pass.finish();
        if (end < start) {
          throw InvalidArgument(where + " ends at " + shardwise::detail::significant(end, 6) +
                                ", before its start " + shardwise::detail::significant(start, 6));
        }
        if (!(action == expected[a])) {
          throw InvalidArgument(where + " is " + to_string(action, chunks > 1) + "; the " +
                                to_string(kind) + " schedule runs " +
                                to_string(expected[a], chunks > 1) + " there");
        }
        (action.pass == Pass::kForward ? forwards : backwards).push_back(end - start);
        stage.push_back({action, start, end});
        file.timeline.makespan = std::max(file.timeline.makespan, end);
      }
      file.timeline.stages.push_back(std::move(stage));
    }
    file.median_forward = median(forwards);
    file.median_backward = median(backwards);
    file.timeline.forward_time = file.median_forward * static_cast<double>(chunks);
    file.timeline.backward_time = file.median_backward * static_cast<double>(chunks);
    // Drawn in units of the median chunk forward: a forward one unit, a backward the nearest
    // whole number of them (at least one), every time rounded to the unit.
    const double unit = file.median_forward > 0 ? file.median_forward : 1;
    // Bounded, so a backward a billion forwards long is a drawing too wide to draw, not inf.
    const double backward_units = std::clamp(std::round(file.median_backward / unit), 1.0,
                                             static_cast<double>(kMaxDrawnSteps) + 1);
    file.drawn.forward_time = static_cast<double>(chunks);
    file.drawn.backward_time = backward_units * static_cast<double>(chunks);
    for (const auto& stage : file.timeline.stages) {
      std::vector<TimedAction> drawn;
      for (const TimedAction& t : stage) {
        const auto units = [&](double time) { return std::min(std::round(time / unit), 1e12); };
        const double start = units(t.start);
        const double end = std::max(start + 1, units(t.end));
        drawn.push_back({t.action, start, end});
        file.drawn.makespan = std::max(file.drawn.makespan, end);
      }
      file.drawn.stages.push_back(std::move(drawn));
    }
    return file;
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.find(what) != std::string::npos) throw;
    throw InvalidArgument(what + ": " + message);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(what + ": " + e.what());
  }
}

}  // namespace shardwise::train

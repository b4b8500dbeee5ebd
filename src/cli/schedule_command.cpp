#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "command.hpp"
#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/train/timeline_file.hpp"
#include "text_table.hpp"

namespace shardwise::cli {
namespace {

// Fractions and pass times as the drawing prints them.
std::string significant_text(double value) { return significant(value, 4); }

class ScheduleCommand final : public Command {
 public:
  explicit ScheduleCommand(CLI::App& parent)
      : app_(parent.add_subcommand(
            "schedule",
            "Draw a pipeline schedule's timeline: each stage's forward and backward "
            "passes, micro-batches in flight, and the bubble")) {
    app_->add_option("--stages", stages_, "Pipeline stages (1 to 1024)");
    app_->add_option("--microbatches", microbatches_, "Micro-batches per step (1 to 65536)");
    app_->add_option("--from", from_,
                     "Draw a timeline file instead: `shardwise train --timeline` (what ran) or "
                     "`shardwise schedule --json` (what was predicted)");
    app_->add_option("--schedule", schedule_, "gpipe, 1f1b or interleaved")->default_val("1f1b");
    app_->add_option("--virtual", virtual_stages_,
                     "Model chunks per device, 1 to 64 (interleaved; default 2 there, 1 "
                     "otherwise)");
    app_->add_option("--forward-time", forward_time_, "Time of a forward pass")->default_val("1");
    app_->add_option("--backward-time", backward_time_, "Time of a backward pass")
        ->default_val("1");
    app_->add_flag("--json", json_, "Print one JSON object instead of the drawing");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    if (from_) {
      for (const char* flag : {"--stages", "--microbatches", "--schedule", "--virtual",
                               "--forward-time", "--backward-time"}) {
        if (app_->get_option(flag)->count() > 0) {
          throw InvalidArgument(std::string(flag) +
                                " describes a schedule to predict; --from draws the file's");
        }
      }
      draw_file(out);
      return;
    }
    for (const auto& [flag, value] :
         {std::pair{"--stages", &stages_}, std::pair{"--microbatches", &microbatches_}}) {
      if (!*value) throw InvalidArgument(std::string(flag) + " is required (or --from FILE)");
    }
    const ScheduleKind kind = parse_schedule_kind(schedule_);
    const std::int64_t stages = integer(*stages_, "--stages");
    const std::int64_t microbatches = integer(*microbatches_, "--microbatches");
    std::int64_t chunks = kind == ScheduleKind::kInterleaved1F1B ? 2 : 1;
    if (virtual_stages_) {
      chunks = integer(*virtual_stages_, "--virtual");
      if (chunks < 1) {
        throw InvalidArgument("--virtual is " + *virtual_stages_ +
                              "; expected at least 1 model chunk per device");
      }
    }
    const PipelineSchedule schedule = build_schedule(kind, stages, microbatches, chunks);
    const PipelineTimeline timeline =
        simulate(schedule, finite_number(forward_time_, "--forward-time"),
                 finite_number(backward_time_, "--backward-time"));
    if (json_) {
      out << to_json(schedule, timeline) << '\n';
      return;
    }
    out << "schedule      " << to_string(kind) << ", " << stages << " stages, " << microbatches
        << " micro-batches"
        << (chunks > 1 ? ", " + std::to_string(chunks) + " chunks per stage" : "") << '\n'
        << "bubble        " << significant_text(timeline.bubble_fraction()) << " counted, "
        << significant_text(schedule.bubble_fraction()) << " = (p - 1) / "
        << (chunks > 1 ? "(v m)" : "m") << '\n'
        << "in flight     " << join_ints(schedule.peak_in_flight(), ", ")
        << (chunks > 1 ? " micro-batch chunks" : " micro-batches") << " at most, per stage\n\n"
        << draw_timeline(schedule, timeline);
  }

 private:
  void draw_file(std::ostream& out) const {
    const train::TimelineFile file = train::read_timeline(read_file(*from_, "--from"), *from_);
    const PipelineSchedule& schedule = file.schedule;
    if (json_) {
      out << to_json(schedule, file.timeline) << '\n';
      return;
    }
    const bool chunks = schedule.virtual_stages > 1;
    out << "schedule      " << to_string(schedule.kind) << ", " << schedule.num_stages
        << " stages, " << schedule.num_microbatches << " micro-batches"
        << (chunks ? ", " + std::to_string(schedule.virtual_stages) + " chunks per stage" : "")
        << (file.measured ? ", as it ran" : "") << '\n'
        << "passes        forward " << significant_text(file.median_forward) << ", backward "
        << significant_text(file.median_backward) << (file.measured ? " s" : "")
        << " (medians; drawn in units of the forward)\n"
        << "bubble        " << significant_text(file.timeline.bubble_fraction())
        << (file.measured ? " measured" : " counted") << ", "
        << significant_text(schedule.bubble_fraction()) << " = (p - 1) / "
        << (chunks ? "(v m)" : "m") << "\n\n"
        << draw_timeline(schedule, file.drawn);
  }

  static std::string to_json(const PipelineSchedule& schedule, const PipelineTimeline& timeline) {
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    for (const auto& stage : timeline.stages) {
      nlohmann::ordered_json actions = nlohmann::ordered_json::array();
      for (const TimedAction& t : stage) {
        actions.push_back({{"pass", t.action.pass == Pass::kForward ? "forward" : "backward"},
                           {"microbatch", t.action.microbatch},
                           {"chunk", t.action.chunk},
                           {"start", t.start},
                           {"end", t.end}});
      }
      stages.push_back(std::move(actions));
    }
    return nlohmann::ordered_json{{"schedule", to_string(schedule.kind)},
                                  {"stages", schedule.num_stages},
                                  {"microbatches", schedule.num_microbatches},
                                  {"virtual_stages", schedule.virtual_stages},
                                  {"bubble_fraction", schedule.bubble_fraction()},
                                  {"counted_bubble_fraction", timeline.bubble_fraction()},
                                  {"makespan", timeline.makespan},
                                  {"peak_in_flight", schedule.peak_in_flight()},
                                  {"timeline", std::move(stages)}}
        .dump();
  }

  CLI::App* app_;
  std::optional<std::string> stages_;
  std::optional<std::string> microbatches_;
  std::optional<std::string> from_;
  std::string schedule_;
  std::optional<std::string> virtual_stages_;
  std::string forward_time_;
  std::string backward_time_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_schedule_command(CLI::App& parent) {
  return std::make_unique<ScheduleCommand>(parent);
}

}  // namespace shardwise::cli

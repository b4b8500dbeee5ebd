#include "shardwise/train/job_pipeline.hpp"

#include <nlohmann/json.hpp>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/pipeline_balance.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/train/parallel_context.hpp"

namespace shardwise::train {

std::optional<PipelineLayout> resolve_pipeline(const std::optional<PipelineRequest>& request,
                                               const ModelDefinition& model, const Mesh& mesh,
                                               const TrainSettings& settings,
                                               const SettingNames& named) {
  const std::int64_t stages = mesh.has_axis("pipeline") ? mesh.axis_size("pipeline") : 1;
  if (stages == 1) {
    if (request) {
      throw InvalidArgument(named("schedule") + ", " + named("microbatches") + ", " +
                            named("virtual_stages") + " and " + named("stages_by") +
                            " "
                            "schedule the pipeline axis; " +
                            named("mesh") + " " + mesh.to_string() +
                            " has none of more than one rank");
    }
    return std::nullopt;
  }
  const PipelineRequest flags = request.value_or(PipelineRequest{});
  PipelineLayout pipeline;
  pipeline.schedule = flags.schedule;
  const bool interleaved = pipeline.schedule == ScheduleKind::kInterleaved1F1B;
  pipeline.virtual_stages = flags.virtual_stages.value_or(interleaved ? 2 : 1);
  if (pipeline.virtual_stages < 1 || pipeline.virtual_stages > kMaxVirtualStages) {
    throw InvalidArgument(named("virtual_stages") + " is " +
                          std::to_string(pipeline.virtual_stages) + "; expected 1 to " +
                          std::to_string(kMaxVirtualStages));
  }
  if (interleaved != (pipeline.virtual_stages > 1)) {
    throw InvalidArgument(named("virtual_stages") + " " + std::to_string(pipeline.virtual_stages) +
                          (interleaved ? ": the interleaved schedule gives each rank at least 2 "
                                         "model chunks"
                                       : " needs " + named("schedule") +
                                             " interleaved (gpipe and 1f1b run one "
                                             "model chunk per rank)"));
  }
  const auto data_parallel = static_cast<std::size_t>(ParallelContext::data_parallel_size_of(mesh));
  const std::size_t sequences = settings.batch / data_parallel;
  if (!flags.microbatches) {
    // The default: the fewest micro-batches, at least one per stage, that split the rank's
    // sequences evenly (for the interleaved schedule, a multiple of the stages).
    pipeline.microbatches = 0;
    for (auto m = static_cast<std::size_t>(stages); m <= sequences; ++m) {
      if (sequences % m == 0 && (!interleaved || m % static_cast<std::size_t>(stages) == 0)) {
        pipeline.microbatches = static_cast<std::int64_t>(m);
        break;
      }
    }
    if (pipeline.microbatches == 0 ||
        pipeline.microbatches > static_cast<std::int64_t>(kMaxMicrobatches)) {
      throw InvalidArgument(
          named("mesh") + " " + mesh.to_string() +
          " runs at least one micro-batch per pipeline stage (" + std::to_string(stages) +
          "), and no such count" + (interleaved ? " (a multiple of the stages)" : "") +
          " of at most " + std::to_string(kMaxMicrobatches) + " divides the " +
          std::to_string(sequences) + " sequences each data-parallel rank takes per step (" +
          named("batch") + " " + std::to_string(settings.batch) + " over " +
          std::to_string(data_parallel) + "); give " + named("batch") + " a multiple of " +
          std::to_string(stages) + ", or " + named("microbatches"));
    }
  } else {
    pipeline.microbatches = *flags.microbatches;
    if (pipeline.microbatches < 1 || pipeline.microbatches > kMaxMicrobatches) {
      throw InvalidArgument(named("microbatches") + " is " + std::to_string(pipeline.microbatches) +
                            "; expected 1 to " + std::to_string(kMaxMicrobatches));
    }
  }
  if (sequences % static_cast<std::size_t>(pipeline.microbatches) != 0) {
    throw InvalidArgument(named("microbatches") + " " + std::to_string(pipeline.microbatches) +
                          " does not divide the " + std::to_string(sequences) +
                          " sequences each data-parallel rank takes per step (" + named("batch") +
                          " " + std::to_string(settings.batch) + " over " +
                          std::to_string(data_parallel) + ")");
  }
  try {
    (void)build_schedule(pipeline.schedule, stages, pipeline.microbatches, pipeline.virtual_stages);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(named("schedule") + " " + to_string(flags.schedule) + ": " + e.what());
  }
  const std::int64_t chunks = stages * pipeline.virtual_stages;
  const auto layers = static_cast<std::int64_t>(model.layers());
  if (chunks > layers) {
    throw InvalidArgument(named("mesh") + " " + mesh.to_string() + " with " +
                          std::to_string(pipeline.virtual_stages) +
                          " model chunks per rank: " + std::to_string(layers) +
                          " layers cannot fill " + std::to_string(chunks) + " virtual stages");
  }
  if (flags.stages_by == StagesBy::kCount) {
    pipeline.layers = PipelineParallelStrategy(chunks).assign_layers_to_stages(layers);
  } else {
    pipeline.layers =
        assign_layers_by_cost(model.layer_flops(settings.seq), chunks, 0.0, model.head_flops())
            .layers_per_stage;
  }
  return pipeline;
}

std::size_t most_actions(const PipelineLayout& pipeline, std::int64_t stages) {
  const PipelineSchedule schedule =
      build_schedule(pipeline.schedule, stages, pipeline.microbatches, pipeline.virtual_stages);
  std::size_t most = 0;
  for (const auto& actions : schedule.actions) most = std::max(most, actions.size());
  return most;
}

std::vector<double> timeline_fields(const PipelineStepResult& result, std::size_t length) {
  std::vector<double> fields(length * kActionFields, -1.0);
  for (std::size_t a = 0; a < result.timeline.size() && a < length; ++a) {
    const ExecutedAction& executed = result.timeline[a];
    double* f = fields.data() + a * kActionFields;
    f[0] = executed.action.pass == Pass::kForward ? 0 : 1;
    f[1] = static_cast<double>(executed.action.microbatch);
    f[2] = static_cast<double>(executed.action.chunk);
    f[3] = executed.start;
    f[4] = executed.end;
  }
  return fields;
}

std::string timeline_json(const PipelineLayout& pipeline, std::int64_t stages,
                          const std::vector<double>& fields, std::size_t length,
                          const std::vector<std::int64_t>& stage_of) {
  using Json = nlohmann::ordered_json;
  const auto actions_of = [&](std::size_t rank) {
    Json actions = Json::array();
    for (std::size_t a = 0; a < length; ++a) {
      const double* f = fields.data() + (rank * length + a) * kActionFields;
      if (f[0] < 0) break;
      actions.push_back({{"pass", f[0] == 0 ? "forward" : "backward"},
                         {"microbatch", static_cast<std::int64_t>(f[1])},
                         {"chunk", static_cast<std::int64_t>(f[2])},
                         {"start", f[3]},
                         {"end", f[4]}});
    }
    return actions;
  };
  Json by_stage = Json::array();
  Json ranks = Json::array();
  for (std::int64_t s = 0; s < stages; ++s) {
    for (std::size_t r = 0; r < stage_of.size(); ++r) {
      if (stage_of[r] == s) {
        by_stage.push_back(actions_of(r));
        break;
      }
    }
  }
  for (std::size_t r = 0; r < stage_of.size(); ++r) {
    ranks.push_back({{"rank", r}, {"stage", stage_of[r]}, {"actions", actions_of(r)}});
  }
  return Json{{"schedule", to_string(pipeline.schedule)},
              {"stages", stages},
              {"microbatches", pipeline.microbatches},
              {"virtual_stages", pipeline.virtual_stages},
              {"measured", true},
              {"timeline", std::move(by_stage)},
              {"ranks", std::move(ranks)}}
      .dump();
}

}  // namespace shardwise::train

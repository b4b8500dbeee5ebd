#include "train_pipeline.hpp"

#include <nlohmann/json.hpp>

#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/pipeline_balance.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/train/parallel_context.hpp"

namespace shardwise::cli {
namespace {

// Forward FLOPs per token of one layer (its matrix products and attention) and of the head (the
// embeddings are a lookup): the costs assign_layers_by_cost balances.
double layer_flops(const models::GptConfig& c, std::size_t seq) {
  const auto C = static_cast<double>(c.n_embd);
  return 24 * C * C + 4 * static_cast<double>(seq) * C;
}

double head_flops(const models::GptConfig& c) {
  return 2 * static_cast<double>(c.vocab_size) * static_cast<double>(c.n_embd);
}

std::string layer_span(const train::LayerRange& range) {
  return range.end_layer - range.first_layer == 1 ? "layer " + std::to_string(range.first_layer)
                                                  : "layers " + std::to_string(range.first_layer) +
                                                        "-" + std::to_string(range.end_layer - 1);
}

}  // namespace

std::optional<models::GptPipeline> resolve_pipeline(const PipelineFlags& flags,
                                                    const models::GptConfig& config,
                                                    const Mesh& mesh,
                                                    const train::TrainSettings& settings) {
  const std::int64_t stages = mesh.has_axis("pipeline") ? mesh.axis_size("pipeline") : 1;
  if (stages == 1) {
    if (flags.any_given) {
      throw InvalidArgument(
          "--schedule, --microbatches, --virtual-stages and --stages-by "
          "schedule the pipeline axis; --mesh " +
          mesh.to_string() + " has none of more than one rank");
    }
    return std::nullopt;
  }
  models::GptPipeline pipeline;
  if (flags.schedule == "gpipe") {
    pipeline.schedule = ScheduleKind::kGPipe;
  } else if (flags.schedule == "1f1b") {
    pipeline.schedule = ScheduleKind::kOneFOneB;
  } else if (flags.schedule == "interleaved") {
    pipeline.schedule = ScheduleKind::kInterleaved1F1B;
  } else {
    throw InvalidArgument("--schedule is '" + echo_input(flags.schedule) +
                          "'; expected gpipe, 1f1b or interleaved");
  }
  const bool interleaved = pipeline.schedule == ScheduleKind::kInterleaved1F1B;
  pipeline.virtual_stages = flags.virtual_stages ? bounded(*flags.virtual_stages,
                                                           "--virtual-stages", 1, kMaxVirtualStages)
                                                 : (interleaved ? 2 : 1);
  if (interleaved != (pipeline.virtual_stages > 1)) {
    throw InvalidArgument("--virtual-stages " + std::to_string(pipeline.virtual_stages) +
                          (interleaved ? ": the interleaved schedule gives each rank at least 2 "
                                         "model chunks"
                                       : " needs --schedule interleaved (gpipe and 1f1b run one "
                                         "model chunk per rank)"));
  }
  const auto data_parallel =
      static_cast<std::size_t>(train::ParallelContext::data_parallel_size_of(mesh));
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
          "--mesh " + mesh.to_string() + " runs at least one micro-batch per pipeline stage (" +
          std::to_string(stages) + "), and no such count" +
          (interleaved ? " (a multiple of the stages)" : "") + " of at most " +
          std::to_string(kMaxMicrobatches) + " divides the " + std::to_string(sequences) +
          " sequences each data-parallel rank takes per step (--batch " +
          std::to_string(settings.batch) + " over " + std::to_string(data_parallel) +
          "); give --batch a multiple of " + std::to_string(stages) + ", or --microbatches");
    }
  } else {
    pipeline.microbatches = bounded(*flags.microbatches, "--microbatches", 1, kMaxMicrobatches);
  }
  if (sequences % static_cast<std::size_t>(pipeline.microbatches) != 0) {
    throw InvalidArgument(
        "--microbatches " + std::to_string(pipeline.microbatches) + " does not divide the " +
        std::to_string(sequences) + " sequences each data-parallel rank takes per step (--batch " +
        std::to_string(settings.batch) + " over " + std::to_string(data_parallel) + ")");
  }
  try {
    (void)build_schedule(pipeline.schedule, stages, pipeline.microbatches, pipeline.virtual_stages);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("--schedule " + flags.schedule + ": " + e.what());
  }
  const std::int64_t chunks = stages * pipeline.virtual_stages;
  const auto layers = static_cast<std::int64_t>(config.n_layer);
  if (chunks > layers) {
    throw InvalidArgument("--mesh " + mesh.to_string() + " with " +
                          std::to_string(pipeline.virtual_stages) +
                          " model chunks per rank: " + std::to_string(layers) +
                          " layers cannot fill " + std::to_string(chunks) + " virtual stages");
  }
  if (flags.stages_by == "count") {
    pipeline.layers = PipelineParallelStrategy(chunks).assign_layers_to_stages(layers);
  } else if (flags.stages_by == "cost") {
    const std::vector<double> costs(static_cast<std::size_t>(layers),
                                    layer_flops(config, settings.seq));
    pipeline.layers =
        assign_layers_by_cost(costs, chunks, 0.0, head_flops(config)).layers_per_stage;
  } else {
    throw InvalidArgument("--stages-by is '" + echo_input(flags.stages_by) +
                          "'; expected count or cost");
  }
  return pipeline;
}

std::string pipeline_plan(const models::GptConfig& config, const models::GptPipeline& pipeline,
                          const Mesh& mesh, std::size_t sequences_per_rank) {
  const std::int64_t stages = mesh.axis_size("pipeline");
  const std::size_t axis = mesh.axis_index("pipeline");
  // The ranks of stage s: every device whose pipeline coordinate is s (the first 8 named).
  const auto ranks_of = [&](std::int64_t s) {
    std::string text;
    std::int64_t count = 0;
    for (std::int64_t r = 0; r < mesh.size(); ++r) {
      if (mesh.coords_at(r)[axis] != s) continue;
      if (++count <= 8) text += (count > 1 ? ", " : "") + std::to_string(r);
    }
    if (count > 8) text += ", ... (" + std::to_string(count) + " ranks)";
    return (count > 1 ? "ranks " : "rank ") + text;
  };
  const PipelineSchedule schedule =
      build_schedule(pipeline.schedule, stages, pipeline.microbatches, pipeline.virtual_stages);
  const std::vector<train::LayerRange> ranges =
      train::virtual_stage_ranges(config.n_layer, pipeline, stages);
  std::string text =
      "pipeline: " + std::to_string(stages) + " stages, " + to_string(pipeline.schedule) + ", " +
      std::to_string(pipeline.microbatches) + " micro-batches of " +
      std::to_string(sequences_per_rank / static_cast<std::size_t>(pipeline.microbatches)) +
      " sequences (published bubble " + std::to_string(schedule.bubble_fraction()).substr(0, 5) +
      ")";
  for (std::int64_t s = 0; s < stages; ++s) {
    text += "\n  stage " + std::to_string(s) + " (" + ranks_of(s) + "):";
    for (std::int64_t k = 0; k < pipeline.virtual_stages; ++k) {
      const train::LayerRange& range =
          ranges[static_cast<std::size_t>(schedule.virtual_stage(s, k))];
      text += std::string(k == 0 ? " " : "; ") + (range.has_first() ? "the embeddings, " : "") +
              layer_span(range) +
              (range.has_last(config.n_layer) ? ", the final norm and the head" : "");
    }
  }
  return text + "\n";
}

std::size_t most_actions(const models::GptPipeline& pipeline, std::int64_t stages) {
  const PipelineSchedule schedule =
      build_schedule(pipeline.schedule, stages, pipeline.microbatches, pipeline.virtual_stages);
  std::size_t most = 0;
  for (const auto& actions : schedule.actions) most = std::max(most, actions.size());
  return most;
}

std::vector<double> timeline_fields(const train::PipelineStepResult& result, std::size_t length) {
  std::vector<double> fields(length * kActionFields, -1.0);
  for (std::size_t a = 0; a < result.timeline.size() && a < length; ++a) {
    const train::ExecutedAction& executed = result.timeline[a];
    double* f = fields.data() + a * kActionFields;
    f[0] = executed.action.pass == Pass::kForward ? 0 : 1;
    f[1] = static_cast<double>(executed.action.microbatch);
    f[2] = static_cast<double>(executed.action.chunk);
    f[3] = executed.start;
    f[4] = executed.end;
  }
  return fields;
}

std::string timeline_json(const models::GptPipeline& pipeline, std::int64_t stages,
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

std::string pipeline_text(const std::optional<models::GptPipeline>& pipeline) {
  if (!pipeline) return "none";
  std::string text = to_string(pipeline->schedule) + "," + std::to_string(pipeline->microbatches) +
                     "," + std::to_string(pipeline->virtual_stages) + ",";
  for (const std::int64_t n : pipeline->layers) text += std::to_string(n) + "+";
  return text;
}

}  // namespace shardwise::cli

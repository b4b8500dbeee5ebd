#pragma once
// How `shardwise train` pipelines the GPT over the mesh's pipeline axis: the schedule flags
// resolved and checked, the layers of each stage (by count, as assign_layers_to_stages, or by
// cost, as assign_layers_by_cost), and the plan's lines about it.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/pipeline_executor.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::cli {

struct PipelineFlags {
  std::string schedule;  // --schedule
  std::optional<std::string> microbatches;
  std::optional<std::string> virtual_stages;
  std::string stages_by;   // --stages-by
  bool any_given = false;  // whether the user gave any of them
};

// The pipeline `flags` ask for on `mesh` (nullopt without a pipeline axis of more than one rank,
// where giving any flag is an InvalidArgument naming it). InvalidArgument names the flag and the
// value that cannot run: a schedule that is none of gpipe, 1f1b, interleaved; micro-batches
// that do not divide a data-parallel rank's sequences; more virtual stages than layers.
std::optional<models::GptPipeline> resolve_pipeline(const PipelineFlags& flags,
                                                    const models::GptConfig& config,
                                                    const Mesh& mesh,
                                                    const train::TrainSettings& settings);

// "pipeline: 2 stages, 1f1b, 4 micro-batches of 2 sequences (published bubble 0.250)", then a
// line per stage: its ranks on `mesh` and its layers ("stage 0 (ranks 0, 1): the embeddings,
// layers 0-1").
std::string pipeline_plan(const models::GptConfig& config, const models::GptPipeline& pipeline,
                          const Mesh& mesh, std::size_t sequences_per_rank);

// Doubles per executed action in a gathered timeline: pass (0 forward, 1 backward),
// micro-batch, chunk, start and end seconds.
inline constexpr std::size_t kActionFields = 5;

// The most actions any stage of `pipeline` runs in a step: the length each rank pads its
// timeline to for one all-gather.
std::size_t most_actions(const models::GptPipeline& pipeline, std::int64_t stages);

// This rank's executed actions as kActionFields doubles each, padded with -1 to `length`
// actions.
std::vector<double> timeline_fields(const train::PipelineStepResult& result, std::size_t length);

// The executed timeline as `shardwise schedule --json` writes a predicted one (and `shardwise
// schedule --from` reads): the schedule's header and, per stage, the actions of its lowest rank;
// plus every rank's own ("ranks": rank, stage, actions). `fields` holds every rank's
// timeline_fields in rank order, `stage_of` each rank's stage.
std::string timeline_json(const models::GptPipeline& pipeline, std::int64_t stages,
                          const std::vector<double>& fields, std::size_t length,
                          const std::vector<std::int64_t>& stage_of);

// What the flags resolved to, for the ranks' comparison: "1f1b,4,1,2+2".
std::string pipeline_text(const std::optional<models::GptPipeline>& pipeline);

}  // namespace shardwise::cli

#pragma once
// How `shardwise train` pipelines the GPT over the mesh's pipeline axis: the schedule flags
// resolved and checked, the layers of each stage (by count, as assign_layers_to_stages, or by
// cost, as assign_layers_by_cost), and the plan's lines about it.

#include <cstddef>
#include <optional>
#include <string>

#include "shardwise/core/mesh.hpp"
#include "shardwise/models/gpt.hpp"
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

// "pipeline: 2 stages, 1f1b, 4 micro-batches of 2 sequences (published bubble 0.25); stage 0:
// the embeddings and layers 0-1; stage 1: layers 2-3 and the head".
std::string pipeline_plan(const models::GptConfig& config, const models::GptPipeline& pipeline,
                          std::int64_t stages, std::size_t sequences_per_rank);

// What the flags resolved to, for the ranks' comparison: "1f1b,4,1,2+2".
std::string pipeline_text(const std::optional<models::GptPipeline>& pipeline);

}  // namespace shardwise::cli

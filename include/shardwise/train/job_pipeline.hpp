#pragma once
// How a training job pipelines a model over the mesh's pipeline axis: the request resolved and
// checked (schedule, micro-batches, model chunks, the layers of each stage by count or by the
// model's FLOPs), and the executed timeline every rank gathers to rank 0.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/pipeline_executor.hpp"
#include "shardwise/train/pipeline_layout.hpp"
#include "shardwise/train/setting_names.hpp"
#include "shardwise/train/trainer.hpp"
#include "shardwise/train/training_job.hpp"

namespace shardwise::train {

// The pipeline `request` asks for on `mesh` (nullopt without a pipeline axis of more than one
// rank, where a request is an InvalidArgument naming its settings). InvalidArgument names the
// setting (as `named` calls it) and the value that cannot run: micro-batches that do not divide a
// data-parallel rank's sequences, more virtual stages than layers, an interleaved schedule of
// one chunk per rank.
[[nodiscard]] std::optional<PipelineLayout> resolve_pipeline(
    const std::optional<PipelineRequest>& request, const ModelDefinition& model, const Mesh& mesh,
    const TrainSettings& settings, const SettingNames& named = {});

// Doubles per executed action in a gathered timeline: pass (0 forward, 1 backward),
// micro-batch, chunk, start and end seconds.
inline constexpr std::size_t kActionFields = 5;

// The most actions any stage of `pipeline` runs in a step: the length each rank pads its
// timeline to for one all-gather.
[[nodiscard]] std::size_t most_actions(const PipelineLayout& pipeline, std::int64_t stages);

// This rank's executed actions as kActionFields doubles each, padded with -1 to `length`.
[[nodiscard]] std::vector<double> timeline_fields(const PipelineStepResult& result,
                                                  std::size_t length);

// The executed timeline as `shardwise schedule --json` writes a predicted one (and `shardwise
// schedule --from` reads): the schedule's header and, per stage, the actions of its lowest rank;
// plus every rank's own ("ranks": rank, stage, actions). `fields` holds every rank's
// timeline_fields in rank order, `stage_of` each rank's stage.
[[nodiscard]] std::string timeline_json(const PipelineLayout& pipeline, std::int64_t stages,
                                        const std::vector<double>& fields, std::size_t length,
                                        const std::vector<std::int64_t>& stage_of);

}  // namespace shardwise::train

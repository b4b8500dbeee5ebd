#pragma once
// Where a training job puts a model's parameters, and what it reports: the model axis' split of
// every parameter, ZeRO's split of each rank's block, the rows of the plan a run prints, and the
// per-step and final reports its observer receives.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/train/pipeline_layout.hpp"
#include "shardwise/train/setting_names.hpp"

namespace shardwise::train {

// Every parameter's place: its split over the model axis (the whole model's, parameters()
// order), the block a rank holds after it (every model rank's blocks have the same shapes), and
// ZeRO's split of those blocks (absent at ZeRO 0).
struct JobLayout {
  std::vector<PartitionSpec> placements;
  std::vector<ParameterSpec> blocks;
  std::optional<ParameterShardings> shardings;
};

// The layout of `model` on `mesh`: the placements `rules` give (InvalidArgument naming the
// parameter where the model's layers compute with another split), and at ZeRO 1 to 3 the split
// `param_sharding` asks for ("first-dim", "logical-axes", or `rules` where they came from a
// file, `file_rules`). Messages name the settings as `named` says.
[[nodiscard]] JobLayout resolve_job_layout(const ModelDefinition& model, const Mesh& mesh, int zero,
                                           const std::string& param_sharding,
                                           const std::optional<ShardingRules>& file_rules,
                                           const SettingNames& named = {});

// The shardings of `held` (a pipeline stage's parameters, by name) among `all`, laid out for
// `all_specs` (the whole model's blocks).
[[nodiscard]] ParameterShardings shardings_held(const ParameterShardings& all,
                                                const std::vector<ParameterSpec>& all_specs,
                                                const std::vector<ParameterSpec>& held);

// What the plan says of one parameter (the first layer's standing for every layer, its layer
// number shown as '*'): its shape, the block a rank holds, its placement over the whole mesh
// (the model axis' split, then ZeRO's of the block) and why ZeRO split it so.
struct ParameterPlanRow {
  std::string name;
  Shape shape;
  Shape block;
  std::string placement;
  std::string why;
};

// A row per parameter of the first layer and per parameter outside the layers (`layers`: each
// parameter's layer, -1 outside them).
[[nodiscard]] std::vector<ParameterPlanRow> parameter_plan_rows(
    const std::vector<ParameterSpec>& specs, const std::vector<std::int64_t>& layers,
    const std::vector<PartitionSpec>& placements, const ParameterShardings* shardings);

// One line: what is replicated, what is sharded how and along which axes.
[[nodiscard]] std::string sharding_plan(int zero, const ParallelContext& context,
                                        std::size_t units);

// A pipeline stage as the plan names it: its ranks and its chunks' layers.
struct StagePlan {
  std::vector<std::int64_t> ranks;
  std::vector<LayerRange> chunks;
};

// What a job reports before its first step.
struct JobPlan {
  std::string mesh;
  int ranks = 1;
  std::string backend;
  std::string model;  // ModelDefinition::describe()
  std::size_t layers = 0;
  std::size_t parameters = 0;  // the whole model's
  std::size_t batch = 0, seq = 0;
  std::int64_t data_parallel = 1;
  std::int64_t model_parallel = 1;
  bool sequence_parallel = false;
  Precision precision = Precision::kFp32;
  DType reduce_dtype = DType::kF32;    // what gradients are reduced in
  DType residual_dtype = DType::kF32;  // what the residual stream is kept in
  std::string sharding;                // sharding_plan's line
  std::optional<PipelineLayout> pipeline;
  double published_bubble = 0;
  std::vector<StagePlan> stages;
  std::vector<ParameterPlanRow> rows;
  std::vector<std::string> notes;  // ZeRO's
};

// The plan in words, as `shardwise train` prints it.
[[nodiscard]] std::string plan_text(const JobPlan& plan);

// One step, as rank 0 saw it.
struct StepReport {
  std::int64_t step = 0;
  std::int64_t steps = 0;
  std::int64_t first_step = 1;  // of this run (a resumed run starts after its checkpoint)
  float loss = 0;
  float learning_rate = 0;
  float grad_norm = 0;
  std::optional<float> val_loss;
  double seconds = 0;
  double tokens_per_s = 0;
  double elapsed_seconds = 0;  // since the run's first step began
};

// What one rank held: parameters, gradients, optimizer state, peak activations, peak gathered
// units (bytes), and its pipeline stage.
struct RankReport {
  std::int64_t params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0, activation_bytes = 0,
               gathered_peak_bytes = 0;
  std::int64_t stage = 0;
  // bf16: the most bytes of the products' bf16 copies of the weights held at once (0 in fp32).
  std::int64_t compute_copies_peak_bytes = 0;
  // A Mixture of Experts: the rows this rank's tokens routed, and those its experts computed on
  // (over an expert axis, what the dispatch brought them), over the run's forwards.
  std::int64_t routed_rows = 0, expert_rows = 0;
  std::int64_t dropped_rows = 0;  // of routed_rows, over their experts' capacity
};

// The pipeline's last step: the measured bubble (idle over busy time, averaged over ranks, as
// the published (p - 1) / m counts it) and each stage's peak activation bytes.
struct PipelineReport {
  PipelineLayout layout;
  double bubble_fraction = 0;
  double published_bubble_fraction = 0;
  std::vector<std::int64_t> peak_activation_bytes_per_stage;
};

struct JobSummary {
  std::size_t parameters = 0;
  std::int64_t steps = 0;
  std::int64_t first_step = 1;
  std::int64_t steps_run = 0;  // 0: the checkpoint resumed was of the last step already
  float final_loss = 0;
  double tokens_per_s = 0;
  std::string blas;
  std::vector<RankReport> ranks;
  // Bytes rank 0 sent along each set of axes per training step (validation not counted).
  std::map<std::string, std::int64_t> comm_bytes_per_step;
  // A Mixture of Experts' measured imbalance: the rows the busiest rank's experts computed on
  // over the rows each rank routed on average (1: every rank's experts as busy; 0: no experts).
  double expert_imbalance = 0;
  // The share of routed rows dropped over their experts' capacity (0 dropless).
  double dropped_fraction = 0;
  bool pipelined = false;                  // whether the job ran a pipeline
  std::optional<PipelineReport> pipeline;  // its last step, where a step ran
};

}  // namespace shardwise::train

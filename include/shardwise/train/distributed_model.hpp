#pragma once
// Any ModelDefinition as the trainer sees it on one rank of a layout: this rank's blocks of the
// parameters (split over the model axis as the placements say, only those of its pipeline
// chunks), its chunks, and, on a pipeline, the schedule's micro-batches (the forward-only
// schedule for validation), the loss to every stage and the tied parameters' gradient sums.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/pipeline_executor.hpp"
#include "shardwise/train/pipeline_layout.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train {

// How a model is laid out on the ranks of a context.
struct ModelLayout {
  // The placement of every parameter over the mesh (definition.parameters() order): the model
  // axis' split, which must be model_placements'. Empty: model_placements.
  std::vector<PartitionSpec> placements;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  // Over the context's pipeline axis; absent: every rank runs the whole model.
  std::optional<PipelineLayout> pipeline;
  // Whether each step's stages start their clocks together (a barrier): for a timeline that
  // lines up; it costs a synchronisation per step.
  bool align_pipeline_clocks = false;
  Precision precision = Precision::kFp32;  // what the matrix products compute in
  // What the residual stream is kept in: float32, or bf16 under bf16 precision
  // (ChunkOptions::residual_dtype).
  DType residual_dtype = DType::kF32;
  // A Mixture of Experts' capacity factor (ChunkOptions::capacity_factor; 0: dropless).
  double capacity_factor = 0;
  // A Mixture of Experts' auxiliary-loss-free expert bias' rate (ChunkOptions::
  // expert_bias_rate; 0: none).
  double expert_bias_rate = 0;
};

class DistributedModel : public Model {
 public:
  // One rank: the whole model, initialised from `seed`.
  DistributedModel(std::shared_ptr<const ModelDefinition> definition, std::uint64_t seed,
                   Precision precision = Precision::kFp32, DType residual_dtype = DType::kF32,
                   double capacity_factor = 0, double expert_bias_rate = 0);
  // This rank's part of the model on `context`, initialised from the whole model's values drawn
  // from `seed` (a ZeRO-3 trainer draws only this rank's slices). InvalidArgument where the
  // layout cannot run: placements the layers do not compute with, a pipeline its layers cannot
  // fill, options the family refuses.
  DistributedModel(std::shared_ptr<const ModelDefinition> definition, std::uint64_t seed,
                   const ParallelContext& context, ModelLayout layout);
  ~DistributedModel() override;
  DistributedModel(const DistributedModel&) = delete;
  DistributedModel& operator=(const DistributedModel&) = delete;

  ParameterStore& parameters() override { return store_; }
  // Without a pipeline, the chunk's forward and backward (telling `ready` as it goes). On one,
  // the schedule's micro-batches (each a share of `sequences`), `ready` told in each chunk's
  // last backward (never of a tied parameter, whose gradients are final only once summed over
  // the ranks holding it, after the schedule), and the mean loss returned on every stage.
  float forward_backward(std::span<const std::int32_t> tokens,
                         std::span<const std::int32_t> targets, std::size_t sequences,
                         std::size_t seq, bool with_grads, const GradientsReady& ready = {},
                         float loss_scale = 1.0F) override;
  // The expert bias' update (ModelLayout::expert_bias_rate): every chunk's counts summed over
  // the ranks that route other rows (data x fsdp x expert x model), in one message, then each
  // layer's bias moved (kernels::update_expert_bias) and the counts zeroed.
  void end_step() override;
  // Each of this rank's layers' expert bias, "expert_bias/layers.L" (experts).
  [[nodiscard]] std::vector<StateArray> state_arrays() override;

  [[nodiscard]] const ModelDefinition& definition() const { return *definition_; }
  // This rank's chunks, in its chunk order (one without a pipeline).
  [[nodiscard]] std::span<const std::unique_ptr<ModelChunk>> chunks() const { return chunks_; }
  [[nodiscard]] ModelChunk& chunk(std::size_t index) { return *chunks_.at(index); }
  // Bytes of the activations every chunk keeps.
  [[nodiscard]] std::size_t activation_bytes() const;
  // The auxiliary loss the last forward added to the loss it returned (ModelChunk::
  // auxiliary_loss; 0 where the model adds none).
  [[nodiscard]] float auxiliary_loss() const;
  // Every chunk's Mixture-of-Experts rows (ModelChunk::expert_rows), summed.
  [[nodiscard]] ModelChunk::ExpertRows expert_rows() const;
  // What the last step's schedule ran on this rank (empty without a pipeline).
  [[nodiscard]] const PipelineStepResult& last_schedule() const { return last_schedule_; }
  [[nodiscard]] const std::optional<PipelineLayout>& pipeline() const { return layout_.pipeline; }

 private:
  // A parameter several pipeline ranks hold: its store index here and those ranks.
  struct TiedGroup {
    std::size_t parameter = 0;
    std::vector<int> stages;
  };
  float pipelined_forward_backward(std::span<const std::int32_t> tokens,
                                   std::span<const std::int32_t> targets, std::size_t sequences,
                                   std::size_t seq, bool with_grads, const GradientsReady& ready,
                                   float loss_scale);
  void sum_tied_gradients();
  // Sums `count` values over the ranks that route other rows (ChunkOptions::sum_over_batch).
  void sum_over_batch(double* values, std::size_t count) const;

  std::shared_ptr<const ModelDefinition> definition_;
  const ParallelContext* context_ = nullptr;
  ModelLayout layout_;
  std::optional<PipelineSchedule> schedule_;
  std::optional<PipelineSchedule> forward_schedule_;  // its forwards only, for validation
  ParameterStore store_;
  std::vector<std::unique_ptr<ModelChunk>> chunks_;
  std::vector<LayerRange> ranges_;  // each chunk's layers
  std::vector<TiedGroup> tied_;
  PipelineStepResult last_schedule_;
};

// The parameters rank `rank` of `mesh` holds of `definition` laid out as `layout` says: its
// blocks after the model axis (all of them, or its pipeline chunks' only, a parameter an earlier
// pipeline rank also holds marked as the tied copy). What DistributedModel's store holds.
[[nodiscard]] std::vector<ParameterSpec> rank_parameters(const ModelDefinition& definition,
                                                         const Mesh& mesh, std::int64_t rank,
                                                         const ModelLayout& layout);

}  // namespace shardwise::train

#pragma once
// The training loop any model can use: data parallel over a group of ranks (the global batch
// split equally), with ZeRO stage 1 (optimizer state sharded), 2 (gradients reduce-scattered
// too) or 3 (parameters sharded too, and gathered unit by unit only while the model uses a unit,
// as FSDP does), each parameter split as its ParameterShardings spec says, AdamW with decoupled
// weight decay (not on norms and biases), global gradient-norm clipping, and a warm-up then cosine
// learning-rate schedule. Every rank updates only the elements it owns; the global batch is the
// same on every mesh, so every layout follows the one-rank run.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/train/corpus.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/setting_names.hpp"
#include "shardwise/train/training_state.hpp"

namespace shardwise::train {
namespace detail {
class ShardedUnits;
class UnitShards;
}  // namespace detail

// Called during backward with a range [begin, end) of the flat gradient buffer whose values
// are final, so that its reduction can start while backward goes on (DDP's bucket hooks).
using GradientsReady = std::function<void(std::size_t begin, std::size_t end)>;

// What the trainer needs of a model: its parameters, and one pass over some sequences: forward
// (returning loss_scale x their mean loss over every position, a position whose target is
// kernels::kIgnoredTarget counting 0) and, where with_grads, backward too (adding that loss's
// gradients into the parameters' gradients, and telling `ready` of each range as it becomes
// final; every parameter's range exactly once). The trainer's loss_scale makes the mean one over
// the positions counted in the whole global batch (Corpus::loss_scale). Under ZeRO-3 the model
// calls parameters().gather(unit) before it reads a unit's values and release(unit) after, in
// forward and again in backward, and announces whole units to `ready`.
class Model {
 public:
  virtual ~Model() = default;
  virtual ParameterStore& parameters() = 0;
  virtual float forward_backward(std::span<const std::int32_t> tokens,
                                 std::span<const std::int32_t> targets, std::size_t sequences,
                                 std::size_t seq, bool with_grads, const GradientsReady& ready = {},
                                 float loss_scale = 1.0F) = 0;
  // Called on every rank once a step's update is done: state the model keeps beyond its
  // parameters moves (a Mixture of Experts' expert bias). Collective.
  virtual void end_step() {}
  // That state, each array whole on every rank that holds it; checkpoints save and load it
  // beside the parameters (where a checkpoint lacks an array it keeps its values).
  struct StateArray {
    std::string name;  // "expert_bias/layers.3"
    Shape shape;
    float* values = nullptr;
  };
  [[nodiscard]] virtual std::vector<StateArray> state_arrays() { return {}; }
};

struct TrainSettings {
  std::size_t batch = 8;  // global sequences per step
  std::size_t seq = 64;
  std::int64_t steps = 100;
  std::int64_t warmup = 10;
  float learning_rate = 1e-3F;
  float min_learning_rate_ratio = 0.1F;  // the cosine ends at this share of learning_rate
  float beta1 = 0.9F;
  float beta2 = 0.95F;
  float weight_decay = 0.1F;
  float grad_clip = 1.0F;  // 0: no clipping
  int zero = 0;            // 0: plain data parallel; 1, 2 or 3
  std::uint64_t seed = 1337;
  // false: gradients are reduced only after backward and ZeRO-3 gathers nothing ahead, so that
  // a benchmark can measure how much communication the overlap hides.
  bool overlap = true;
  // What the data-parallel ranks reduce gradients in (ZeRO's reduce-scatters, the all-reduces):
  // float32, or bf16 (half the bytes; each rank's gradient rounded to bf16 before the sum, which
  // runs in float32 and is rounded again, as Megatron-LM's --grad-reduce-in-bf16). The
  // gradients themselves, their norm and the optimizer stay float32.
  DType reduce_dtype = DType::kF32;
  // What ZeRO-3 all-gathers parameters in (FSDP2's param_dtype): float32, or bf16 (half the
  // bytes; each rank rounds its masters' chunk, and the model reads the gathered unit's
  // roundings, as bf16 mixed precision reads every parameter). The job sets it from its
  // precision.
  DType gather_dtype = DType::kF32;
  // How ZeRO (1 to 3) splits each parameter over the shard group; for as many ranks as the group
  // has, naming no other axis. Absent: default_shardings over the group's axis (every parameter
  // split along its first dimension the group divides, as FSDP2 does).
  std::optional<ParameterShardings> shardings;
};

// Throws InvalidArgument naming the field where the settings cannot train on
// `data_parallel_ranks` ranks (data x fsdp x expert): a batch they do not divide, a ZeRO stage not
// 0 to 3. The trainer checks them; a command checks them before it starts any rank.
void check_settings(const TrainSettings& settings, std::size_t data_parallel_ranks,
                    const SettingNames& named = {});

// Throws InvalidArgument naming the parameter where its declared gradient reduction is one the
// trainer does not run: it averages every gradient over the batch's roles (data, fsdp and
// expert), or a block of experts the expert axis splits over data and fsdp only (then divides it
// by the expert degree), and sums a block model ranks share among them. A gradient averaged over
// another set of ranks is refused rather than averaged over the wrong ones.
void check_gradient_reductions(const std::vector<ParameterSpec>& parameters);

// The learning rate of step `step` (1 for the first): linear warm-up over `warmup` steps, then
// cosine decay to min_learning_rate_ratio x learning_rate at the last step.
[[nodiscard]] float learning_rate_at(const TrainSettings& settings, std::int64_t step);

struct StepStats {
  std::int64_t step = 0;
  float loss = 0;  // the global batch's mean loss
  float learning_rate = 0;
  float grad_norm = 0;  // before clipping
};

class Trainer {
 public:
  // Trains on every rank of `context` (collective over its world). The global batch is split
  // among the data-parallel ranks (data x fsdp x expert) and must divide among them; zero must be 0
  // to 3 (InvalidArgument naming the field otherwise). ZeRO shards over the context's shard axis
  // (fsdp, else data); with both axes the shards are replicated over data (HSDP): gradients
  // are reduce-scattered (or all-reduced) within the shards and all-reduced across the
  // replicas. ZeRO-3 shards the model's parameter store: after the trainer is gone the store
  // has no values (full_parameters() gathers them first).
  Trainer(ParallelContext& context, Model& model, const Corpus& corpus, TrainSettings settings);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs the next step (collective over the group).
  StepStats step();
  // The mean loss over `batches` global batches of held-out data (collective).
  float validation_loss(std::size_t batches);

  // Bytes this rank keeps for parameters, gradients and optimizer state.
  [[nodiscard]] std::size_t params_bytes() const;
  [[nodiscard]] std::size_t grads_bytes() const;
  [[nodiscard]] std::size_t optimizer_bytes() const;
  // The most bytes of gathered parameters and full gradients held at once (ZeRO-3; 0 otherwise).
  [[nodiscard]] std::size_t gathered_peak_bytes() const;
  // Bytes of gathered parameters and full gradients held now: 0 between steps.
  [[nodiscard]] std::size_t gathered_bytes() const;
  // ZeRO-3: freed gather and gradient buffers kept for the next units of their size, in bytes
  // (with those in use, never more than gathered_peak_bytes).
  [[nodiscard]] std::size_t gather_buffers_kept_bytes() const;
  // ZeRO-3: the gathers of the last step whose unit was prefetched, and those that waited.
  [[nodiscard]] std::pair<std::size_t, std::size_t> gathers_prefetched_and_waited() const;
  // Every parameter, in the store's flat layout (collective over the group under ZeRO-3).
  [[nodiscard]] std::vector<float> full_parameters();
  [[nodiscard]] std::int64_t steps_done() const { return steps_done_; }

  // This rank's blocks of the training state (values, exp_avg, exp_avg_sq of every parameter
  // it holds), pointing into the trainer's and the store's buffers: a checkpoint reads them to
  // save and writes them to load. Valid until the next step; between steps only.
  [[nodiscard]] std::vector<StateBlock> state_blocks();
  // Continues as if `steps` steps had been done (after a checkpoint's state was loaded): the
  // next step is steps + 1, with its learning rate and batch. InvalidArgument for a negative
  // count or one past --steps.
  void resume_at(std::int64_t steps);
  // The shardings ZeRO uses (nullptr at ZeRO 0).
  [[nodiscard]] const ParameterShardings* shardings() const;

 private:
  // AdamW step `step` on the elements this rank owns, its gradients first scaled by grad_scale.
  void update(float learning_rate, float grad_scale, std::int64_t step);
  StepStats step_units(std::int64_t step, const TokenBatch& batch);
  // ZeRO-2: each unit's averaged gradients to the ranks that own them.
  void reduce_scatter_grads();
  // ZeRO 1 and 2: every rank's updated blocks to every rank.
  void gather_values();
  [[nodiscard]] const detail::UnitShards& layout() const;
  [[nodiscard]] const float* owned_grads_slice() const;
  // The squares of this rank's blocks of the averaged gradients, first copies only.
  [[nodiscard]] double owned_squares() const;
  // The norm from every rank's disjoint sum of squares (over the shards, and over the model axis
  // where tensor parallelism splits parameters).
  float global_norm(double squares);
  // Whether this rank counts the parameter in the norm: a block split over the model or expert
  // axis is its own; a parameter every model (expert) rank holds whole counts on the first only.
  [[nodiscard]] bool counted_once(std::size_t parameter) const;
  // Over the expert axis, after the data axes' reductions: the parameters every expert rank
  // holds averaged over them, this rank's experts divided by the degree. `grads` is laid out as
  // the store (false) or as this rank's slices (true).
  void combine_over_experts(float* grads, bool slices);
  [[nodiscard]] float clip_scale(float norm) const;
  // This rank's sequences of global batch `index` of the split.
  [[nodiscard]] TokenBatch my_share(Corpus::Split split, std::uint64_t index) const;
  // The corpus's loss scale for global batch `index` of the split.
  [[nodiscard]] float scale_of(Corpus::Split split, std::uint64_t index) const;
  // One pass of the model; under ZeRO-3 bracketed by the units' pass, abandoned on failure.
  float run_model(const TokenBatch& batch, float loss_scale, bool with_grads,
                  const GradientsReady& ready);

  // Averages `count` elements in place over the shards, then over the replicas, in float32 (the
  // loss).
  void average(float* data, std::size_t count);
  // Averages in place over the replicas of this rank's shard (HSDP; nothing without), in the
  // reduce dtype.
  void average_over_replicas(std::span<float> values);
  // Averages `values` in place over `group` of `comm`, in the reduce dtype.
  void average_in_reduce_dtype(Communicator& comm, const Group& group, std::span<float> values);
  // ZeRO-2 in bf16: every member's blocks rounded, reduce-scattered, this rank's widened.
  void reduce_scatter_in_bf16(std::span<const float> packed, std::span<float> mine);
  // ZeRO 0 and 1: reduces the gradients backward did not announce (`started` holds the ranges
  // it did), with `reduce`; an announcement that overlaps another is an InvalidArgument.
  void reduce_unannounced(std::vector<std::pair<std::size_t, std::size_t>>& started,
                          const std::function<void(std::size_t, std::size_t)>& reduce);

  ParallelContext& context_;
  Communicator& shards_comm_;    // the ranks ZeRO shards over (the data-parallel ranks
  Group group_;                  // without HSDP), and all of them as a group
  Communicator& replicas_comm_;  // this rank's replicas of its shard (itself alone without
  Group replicas_;               // HSDP), and all of them
  Communicator& experts_comm_;   // this rank's expert axis (itself alone without one)
  Group experts_;
  int member_ = 0;  // index in group_
  Model& model_;
  ParameterStore& store_;
  const Corpus& corpus_;
  TrainSettings settings_;
  std::vector<float> m_;  // AdamW moments of the owned elements (laid out as the slices)
  std::vector<float> v_;
  std::vector<float> grads_slice_;              // ZeRO-2: this rank's averaged gradients
  std::unique_ptr<detail::UnitShards> shards_;  // ZeRO 1 and 2
  // ZeRO 1 and 2: packed units on their way to or from the group, reused from step to step.
  std::vector<float> packed_;
  std::vector<BFloat16> narrow_;       // gradients on their way in bf16, reused from step to step
  std::vector<float> expert_staging_;  // the dense gradients averaged over the expert axis
  std::unique_ptr<detail::ShardedUnits> units_;  // ZeRO-3
  std::int64_t steps_done_ = 0;
};

}  // namespace shardwise::train

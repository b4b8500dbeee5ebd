#pragma once
// A whole training run as one library object, for any model family: settings in, a resolved
// layout, a memory check, every rank agreeing on every setting, the steps, checkpoints (save,
// every N, keep K, async, resume into any layout) and run logs out. `shardwise train` parses its
// flags into JobSettings and prints what the job reports; a C++ program does the same without
// the command (examples/). Messages name each setting as the `shardwise train` flag of the same
// name (--mesh, --microbatches), as CheckpointPolicy's do.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/comm/backend_registry.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/precision.hpp"
#include "shardwise/strategy/recompute.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/corpus.hpp"
#include "shardwise/train/job_layout.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/pipeline_layout.hpp"
#include "shardwise/train/setting_names.hpp"
#include "shardwise/train/token_source.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train {

class DistributedModel;

// How layers go to pipeline stages.
enum class StagesBy {
  kCount,  // equal counts, the first stages taking the remainder
  kCost,   // the slowest stage as fast as possible (layer_flops, the head on the last)
};

// What a run asks of the mesh's pipeline axis; unset fields take the defaults.
struct PipelineRequest {
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  // Per step on each data-parallel rank; default: the fewest, at least one per stage, that
  // divide the rank's sequences.
  std::optional<std::int64_t> microbatches;
  std::optional<std::int64_t> virtual_stages;  // default 2 interleaved, else 1
  StagesBy stages_by = StagesBy::kCount;
};

// Where the tokens come from.
struct DataSettings {
  std::optional<std::string> path;  // absent: the built-in corpus (text)
  TokenFormat format = TokenFormat::kText;
  std::optional<std::string> validation_path;  // absent: the last tenth of the data
  // The tokenizer.json that encodes text data (and the held-out text) as the model reads it;
  // absent: text is bytes, which only a model of 256 tokens reads.
  std::optional<std::string> tokenizer;
};

struct JobSettings {
  std::shared_ptr<const ModelDefinition> model;
  std::string model_given;  // how the caller named the model (its logs keep it)
  // Axes data, fsdp, model and pipeline, rank r on device r.
  Mesh mesh{{"data"}, {1}};
  // Steps, batch, sequence (0, the default here: the model's context), learning rate, ZeRO
  // stage, seed. `shardings` is the job's to fill (from param_sharding).
  TrainSettings training = [] {
    TrainSettings settings;
    settings.seq = 0;
    return settings;
  }();
  // How ZeRO splits each parameter: "first-dim" (dimension 0, as FSDP2), "logical-axes" (the
  // strategies' FSDP rules on the logical axes), or the name of `sharding_rules`' source.
  std::string param_sharding = "first-dim";
  // A rules file's rules: the model axis' split and ZeRO's (its parameter_rules and stage_rules
  // are refused: a model declares its logical axes, and the job assigns stages).
  std::optional<ShardingRules> sharding_rules;
  // Given where the mesh has a pipeline axis of more than one rank (the defaults where absent).
  std::optional<PipelineRequest> pipeline;
  Recompute recompute = Recompute::kNone;
  // What the model computes in: fp32, or bf16 mixed precision (float32 masters and moments,
  // bf16 products); training.reduce_dtype says what gradients are reduced in.
  Precision precision = Precision::kFp32;
  // What the residual stream is kept in: fp32 (as autocast), or under bf16 precision bf16
  // (as Megatron-LM's --bf16 without --fp32-residual-connection: each residual add rounded).
  DType residual_dtype = DType::kF32;
  // A Mixture of Experts' capacity factor: each expert takes at most ceil(factor x seq x k /
  // experts) of each sequence's choices, in token order, the rest dropped (Megatron-LM's
  // --moe-expert-capacity-factor, per sequence); 0: dropless.
  double capacity_factor = 0;
  // A Mixture of Experts' auxiliary-loss-free load balancing (torchtitan's load_balance_coeff):
  // each layer's expert bias, added to the probabilities for the choice only, moves after each
  // step by this rate toward the experts chosen less than the mean (ModelLayout::
  // expert_bias_rate); 0: none.
  double expert_bias_rate = 0;
  bool sequence_parallel = false;
  DataSettings data;
  std::int64_t eval_every = 0;   // validation loss every K steps (0: never)
  std::size_t eval_batches = 4;  // global batches of held-out data per validation
  CheckpointPolicy checkpoints;
  std::optional<std::string> log_dir;   // TensorBoard events, metrics.jsonl, config.json
  std::optional<std::string> timeline;  // the last step's executed pipeline timeline, as JSON
  int threads = 0;                      // BLAS threads per rank (0: the library's default)
  // How the caller names these settings in messages (a command: its flags); their own names
  // ("batch", "mesh") where it does not say.
  SettingNames names;
  // What else every rank must agree on and the logs keep ("--json": "on"), in order.
  std::vector<std::pair<std::string, std::string>> caller_settings;
};

// What the job tells its caller, on rank 0 only (and from one thread at a time).
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  // Before the first step: the layout as words (mesh, plan, pipeline stages, the parameter
  // table's rows and ZeRO's notes).
  virtual void started(const JobPlan& /*plan*/) {}
  // A checkpoint's note (what a resume changes, what a save left).
  virtual void note(const std::string& /*text*/) {}
  // The log folder, once made.
  virtual void logging(const std::string& /*folder*/) {}
  virtual void step(const StepReport& /*report*/) {}
  virtual void finished(const JobSummary& /*summary*/) {}
};

class TrainingJob {
 public:
  // Resolves and checks everything that can be checked before a rank starts: the mesh's axes,
  // the batch and sequence against the mesh and the model, the pipeline (schedule,
  // micro-batches, stage assignment), the placements over the model axis and ZeRO's split of
  // each block, the data files, the log folder, the timeline path, the checkpoint to resume.
  // InvalidArgument naming the flag and the value otherwise.
  explicit TrainingJob(JobSettings settings);
  ~TrainingJob();
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  [[nodiscard]] const JobSettings& settings() const { return settings_; }
  // The pipeline the job runs (absent without a pipeline axis of more than one rank).
  [[nodiscard]] const std::optional<PipelineLayout>& pipeline() const { return pipeline_; }
  // InvalidArgument where this job's ranks on this machine (the threads of this process, or the
  // processes `backend`'s launcher started here) need more than half its memory.
  void check_memory(const BackendInfo& backend) const;

  // Runs the job on every rank `backend` starts (threads, or the launcher's processes),
  // reporting to `observer` on rank 0. A rank's input error (a token outside the vocabulary,
  // drawn at step 900) is thrown as an InvalidArgument naming the rank.
  void run(const BackendInfo& backend, JobObserver& observer) const;
  // One rank's part, for callers that start ranks themselves (collective over `comm`, whose
  // size must be the mesh's): the ranks compare every setting (CRC-32C), then train.
  void run_rank(Communicator& comm, JobObserver& observer) const;

 private:
  void train_rank(Communicator& comm, JobObserver& observer) const;
  // What rank 0 reports before the first step.
  [[nodiscard]] JobPlan describe_plan(const ParallelContext& context, DistributedModel& model,
                                      const TrainSettings& settings,
                                      const ParameterShardings* whole_shardings) const;
  // Every rank's bytes and last schedule gathered (collective), the timeline written.
  [[nodiscard]] JobSummary summarise(const ParallelContext& context, Trainer& trainer,
                                     DistributedModel& model, std::size_t parameters,
                                     std::int64_t first_step, float loss, double seconds,
                                     const std::map<std::string, std::int64_t>& per_axes) const;

  JobSettings settings_;
  std::optional<PipelineLayout> pipeline_;
  std::unique_ptr<const Corpus> corpus_;
  JobLayout layout_;
  double bytes_per_rank_ = 0;
};

}  // namespace shardwise::train

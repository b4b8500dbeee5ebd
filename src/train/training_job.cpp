#include "shardwise/train/training_job.hpp"

#include <unistd.h>

#include <bit>
#include <chrono>
#include <limits>

#include "../detail/output_file.hpp"
#include "../detail/text_format.hpp"
#include "shardwise/comm/backend_choice.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/blas_library.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/plan/cost_model.hpp"
#include "shardwise/plan/model_shape.hpp"
#include "shardwise/strategy/mesh_axes.hpp"
#include "shardwise/text/tokenizer.hpp"
#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/fine_tuning_data.hpp"
#include "shardwise/train/job_log.hpp"
#include "shardwise/train/job_pipeline.hpp"
#include "shardwise/train/pipeline_executor.hpp"
#include "shardwise/train/placement.hpp"
#include "shardwise/train/rank_runner.hpp"
#include "shardwise/train/run_log.hpp"
#include "shardwise/train/settings_agreement.hpp"

namespace shardwise::train {
namespace {

using Clock = std::chrono::steady_clock;

// The mesh a job runs: axes data, fsdp, model and pipeline, rank r on device r.
void check_mesh(const Mesh& mesh, const SettingNames& named) {
  check_trained_axes(mesh, named("mesh"));
  if (!mesh.has_default_device_ids()) {
    throw InvalidArgument(named("mesh") + ": " + mesh.to_string() +
                          " names devices; the training job runs rank r as device r, so give "
                          "the axes only");
  }
}

std::int64_t degree_of(const Mesh& mesh, std::string_view axis) {
  return mesh.has_axis(axis) ? mesh.axis_size(axis) : 1;
}

// What one rank holds, as the planner predicts it for this run (the trainer's state after ZeRO
// in its precision, its activations, gathered units and compute copies): one count for the
// planner and this check.
double planned_bytes_per_rank(const JobSettings& job,
                              const std::optional<PipelineLayout>& pipeline) {
  const Mesh& mesh = job.mesh;
  const TrainSettings& settings = job.training;
  plan::Layout layout;
  layout.zero = settings.zero;
  // At ZeRO 0 an fsdp axis is one more data axis.
  layout.fsdp = settings.zero > 0 ? degree_of(mesh, "fsdp") : 1;
  layout.model = degree_of(mesh, kModelAxis);
  layout.pipeline = degree_of(mesh, kPipelineAxis);
  layout.data = mesh.size() / (layout.fsdp * layout.model * layout.pipeline);
  if (pipeline) {
    layout.microbatches = pipeline->microbatches;
    layout.virtual_stages = pipeline->virtual_stages;
    // The stages as the trainer splits them, uneven ones too.
    for (const LayerRange& range :
         virtual_stage_ranges(job.model->layers(), *pipeline, layout.pipeline)) {
      layout.stage_layers.push_back(static_cast<std::int64_t>(range.size()));
    }
    layout.schedule = pipeline->schedule;
  }
  layout.sequence_parallel = job.sequence_parallel;
  layout.recompute = job.recompute;
  plan::TrainingSetup setup;
  setup.global_batch = static_cast<std::int64_t>(settings.batch);
  setup.seq = static_cast<std::int64_t>(settings.seq);
  setup.micro_batch = setup.global_batch / (layout.data * layout.fsdp) / layout.microbatches;
  setup.precision = plan::planned(job.precision);
  setup.reduce_dtype = settings.reduce_dtype;
  setup.residual_dtype = job.residual_dtype;
  setup.expert_bias = job.expert_bias_rate > 0;
  plan::Cluster cluster;  // only the memory counts here
  cluster.devices = mesh.size();
  cluster.devices_per_node = mesh.size();
  cluster.memory_bytes = std::numeric_limits<std::int64_t>::max();
  cluster.peak_flops_fp32 = cluster.peak_flops_bf16 = 1;
  cluster.intra_node = cluster.inter_node = {1, 0};
  const plan::ModelShape shape = plan::shape_of(job.model->manifest());
  return static_cast<double>(plan::evaluate(shape, cluster, setup, layout).memory.total());
}

// Values, gradients and AdamW's two moments of every parameter, in fp32.
double state_bytes_floor(const ModelDefinition& model) {
  double elements = 0;
  for (const ParameterSpec& spec : model.parameters()) {
    double n = 1;
    for (const std::int64_t size : spec.shape) n *= static_cast<double>(size);
    elements += n;
  }
  return elements * 4 * 4;
}

void check_tokenizer_vocab(const text::Tokenizer& tokenizer, const std::string& path,
                           const ModelDefinition& model, const SettingNames& named) {
  if (tokenizer.vocab_size() > model.vocab_size()) {
    throw InvalidArgument(named("tokenizer") + " '" + echo_input(path, 200) + "' has " +
                          std::to_string(tokenizer.vocab_size()) + " tokens; " + model.describe() +
                          " has a vocabulary of " + std::to_string(model.vocab_size()));
  }
}

Corpus corpus_of(const DataSettings& data, std::size_t seq, const ModelDefinition& model,
                 const SettingNames& named) {
  if (!data.path) return Corpus::builtin(seq);
  const std::size_t vocab = model.vocab_size();
  if (data.format == TokenFormat::kJsonLines) {
    // check_data has seen the tokenizer given.
    const ExampleEncoder encoder = example_encoder_of(*data.tokenizer);
    check_tokenizer_vocab(*encoder.tokenizer, *data.tokenizer, model, named);
    auto train = read_json_lines(*data.path, encoder, named("data"));
    auto held_out = data.validation_path
                        ? read_json_lines(*data.validation_path, encoder, named("val_data"))
                        : nullptr;
    return {std::move(train), std::move(held_out), seq, vocab};
  }
  if (!data.tokenizer) {
    auto train = file_source(*data.path, data.format, named("data"));
    auto held_out = data.validation_path
                        ? file_source(*data.validation_path, data.format, named("val_data"))
                        : nullptr;
    return {std::move(train), std::move(held_out), seq, vocab};
  }
  const text::Tokenizer tokenizer = text::Tokenizer::from_file(*data.tokenizer);
  const std::string words = "tokenizer.json '" + echo_input(*data.tokenizer, 200) + "'";
  check_tokenizer_vocab(tokenizer, *data.tokenizer, model, named);
  auto train = encoded_text_source(*data.path, tokenizer, words, named("data"));
  auto held_out = data.validation_path ? encoded_text_source(*data.validation_path, tokenizer,
                                                             words, named("val_data"))
                                       : nullptr;
  return {std::move(train), std::move(held_out), seq, vocab};
}

// Text reaches a model through its tokenizer; bytes are the tokens of a 256-token model alone.
void check_data(const DataSettings& data, const ModelDefinition& model, const SettingNames& named) {
  if (data.tokenizer && data.tokenizer->empty()) {
    throw InvalidArgument(named("tokenizer") + " is empty; expected a tokenizer.json");
  }
  if (data.format == TokenFormat::kJsonLines && !data.tokenizer) {
    throw InvalidArgument(named("data") +
                          " is JSON Lines of examples, which are text: give the model's tokenizer "
                          "(" +
                          named("tokenizer") + ", or " + named("init_from") +
                          " a Hugging Face folder holding tokenizer.json; its folder's "
                          "chat template renders conversations)");
  }
  if (data.tokenizer && data.format != TokenFormat::kText &&
      data.format != TokenFormat::kJsonLines) {
    throw InvalidArgument(named("tokenizer") + " encodes text, and " + named("data_format") + " " +
                          to_string(data.format) + " is ids already");
  }
  if (data.tokenizer && !data.path) {
    throw InvalidArgument(named("tokenizer") + " encodes " + named("data") +
                          ", which is not given (the built-in corpus is "
                          "bytes)");
  }
  const std::size_t vocab = model.vocab_size();
  if (!data.tokenizer && data.format == TokenFormat::kText &&
      (data.path ? vocab != 256 : vocab < 256)) {
    throw InvalidArgument(
        data.path ? named("data") + " is text and " + model.describe() + " has a vocabulary of " +
                        std::to_string(vocab) +
                        " tokens: text is read as bytes for a model of 256 tokens alone; give the "
                        "model's tokenizer (" +
                        named("tokenizer") + ", or " + named("init_from") +
                        " a Hugging Face folder "
                        "holding tokenizer.json) or token files (" +
                        named("data_format") +
                        " tokens-u16 or "
                        "tokens-u32, which shardwise data prepare writes)"
                  : named("model") + ": vocab_size " + std::to_string(vocab) +
                        " is below 256, the built-in corpus's byte tokens");
  }
}

std::string on_off(bool value) { return value ? "on" : "off"; }

// The measured bubble and each stage's peak activation bytes, from every rank's report and its
// last schedule's busy and elapsed seconds.
PipelineReport pipeline_report(const PipelineLayout& pipeline, const std::vector<RankReport>& ranks,
                               const std::vector<double>& busy,
                               const std::vector<double>& elapsed) {
  double bubble = 0;
  std::map<std::int64_t, std::int64_t> peak_by_stage;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    bubble += busy[r] > 0 ? (elapsed[r] - busy[r]) / busy[r] : 0;
    peak_by_stage[ranks[r].stage] =
        std::max(peak_by_stage[ranks[r].stage], ranks[r].activation_bytes);
  }
  PipelineReport report;
  report.layout = pipeline;
  report.bubble_fraction = bubble / static_cast<double>(ranks.size());
  for (const auto& [stage, bytes] : peak_by_stage) {
    report.peak_activation_bytes_per_stage.push_back(bytes);
  }
  report.published_bubble_fraction =
      build_schedule(pipeline.schedule, static_cast<std::int64_t>(peak_by_stage.size()),
                     pipeline.microbatches, pipeline.virtual_stages)
          .bubble_fraction();
  return report;
}

}  // namespace

TrainingJob::TrainingJob(JobSettings settings) : settings_(std::move(settings)) {
  JobSettings& s = settings_;
  const SettingNames& named = s.names;
  s.checkpoints.names = named;
  s.checkpoints.expert_bias = s.expert_bias_rate > 0;
  if (!s.model) throw InvalidArgument("the job has no model");
  check_mesh(s.mesh, named);
  TrainSettings& t = s.training;
  if (t.seq == 0) t.seq = s.model->context_length();
  if (t.seq > s.model->context_length()) {
    throw InvalidArgument(named("seq") + " is " + std::to_string(t.seq) +
                          "; the model takes at most " + std::to_string(s.model->context_length()) +
                          " tokens");
  }
  check_data(s.data, *s.model, named);
  const ResumePoint resume = check_resume(s.checkpoints, checkpointed_model(s.model), t.steps);
  check_checkpoint_policy(s.checkpoints, t.steps, resume);
  check_settings(t, static_cast<std::size_t>(ParallelContext::data_parallel_size_of(s.mesh)),
                 named);
  if (s.eval_every < 0 || s.eval_every > t.steps) {
    throw InvalidArgument(named("eval_every") + " is " + std::to_string(s.eval_every) +
                          "; expected 0 to " + std::to_string(t.steps));
  }
  const std::int64_t model_degree = degree_of(s.mesh, kModelAxis);
  if (s.sequence_parallel && model_degree == 1) {
    throw InvalidArgument(named("sequence_parallel") +
                          " splits the sequence over the model axis; " + named("mesh") + " " +
                          s.mesh.to_string() + " has none");
  }
  if (s.sequence_parallel && t.seq % static_cast<std::size_t>(model_degree) != 0) {
    throw InvalidArgument(named("sequence_parallel") + ": " + named("seq") + " " +
                          std::to_string(t.seq) + " does not divide among the " +
                          std::to_string(model_degree) + " model ranks");
  }
  if (s.residual_dtype != DType::kF32 && s.residual_dtype != DType::kBF16) {
    throw InvalidArgument(named("residual_dtype") + " is " +
                          shardwise::to_string(s.residual_dtype) + "; expected fp32 or bf16");
  }
  if (s.residual_dtype == DType::kBF16 && s.precision != Precision::kBf16) {
    throw InvalidArgument(named("residual_dtype") + " is bf16 under " + named("precision") + " " +
                          to_string(s.precision) +
                          "; a bf16 residual stream is part of bf16 precision");
  }
  s.model->check_options(s.sequence_parallel, s.recompute, named("model"));
  s.model->check_stages(degree_of(s.mesh, kPipelineAxis), named("mesh"));
  // A Mixture of Experts' settings: 0 (off) to 1e6, and above 0 only for a model with experts.
  const bool has_experts =
      !s.model->manifest().transformer || s.model->manifest().transformer->moe();
  for (const auto& [setting, value, off, does] :
       {std::tuple{"capacity_factor", s.capacity_factor, "0 (dropless) or a factor",
                   " caps a Mixture of Experts' experts; "},
        std::tuple{"expert_bias_rate", s.expert_bias_rate, "0 (no expert bias) or a rate",
                   " moves a Mixture of Experts' expert bias; "}}) {
    if (!(value >= 0 && value <= 1e6)) {
      throw InvalidArgument(named(setting) + " is " + std::to_string(value) + "; expected " + off +
                            " up to 1e6");
    }
    if (value > 0 && !has_experts) {
      throw InvalidArgument(named(setting) + " " + std::to_string(value) + does + named("model") +
                            " has no experts");
    }
  }
  pipeline_ = resolve_pipeline(s.pipeline, *s.model, s.mesh, t, named);
  if (s.capacity_factor > 0 && model_degree > 1) {
    // Each model rank routes whole sequences of a micro-batch (MoePart): a sequence's capacity
    // counts its choices in token order.
    const auto micro = t.batch /
                       static_cast<std::size_t>(ParallelContext::data_parallel_size_of(s.mesh)) /
                       static_cast<std::size_t>(pipeline_ ? pipeline_->microbatches : 1);
    if (micro % static_cast<std::size_t>(model_degree) != 0) {
      throw InvalidArgument(named("capacity_factor") + " " + std::to_string(s.capacity_factor) +
                            " over " + std::to_string(model_degree) +
                            " model ranks, each routing whole sequences: a micro-batch's " +
                            std::to_string(micro) + " sequences do not divide among them");
    }
  }
  if (s.timeline && !pipeline_) {
    throw InvalidArgument(named("timeline") + " writes the pipeline's executed schedule; " +
                          named("mesh") + " " + s.mesh.to_string() +
                          " has no pipeline axis of more than one rank");
  }
  if (s.log_dir) RunLog::check_folder(*s.log_dir);
  // A timeline that could not be written is found now, not after the run, and nothing is
  // made for it yet (a symlink or FIFO there is refused, never opened).
  if (s.timeline) {
    shardwise::detail::check_output_path(*s.timeline, shardwise::detail::IfExists::kReplaceFile,
                                         named("timeline"));
  }
  layout_ = resolve_job_layout(*s.model, s.mesh, t.zero, s.param_sharding, s.sharding_rules, named);
  try {
    bytes_per_rank_ = planned_bytes_per_rank(s, pipeline_);
  } catch (const InvalidArgument&) {
    // A model the planner cannot shape (no attention heads, no transformer layers) still runs:
    // the check counts its fp32 state alone (values, gradients, two moments), unsharded, and
    // never refuses it for what the planner cannot model.
    bytes_per_rank_ = state_bytes_floor(*s.model);
  }
  corpus_ = std::make_unique<const Corpus>(corpus_of(s.data, t.seq, *s.model, named));
}

TrainingJob::~TrainingJob() = default;

void TrainingJob::check_memory(const BackendInfo& backend) const {
  const SettingNames& named = settings_.names;
  // Every rank on this machine counts: the threads of this process, or the processes the
  // launcher started here.
  const int processes = backend.rank_per_process ? processes_on_this_node() : 1;
  const double ranks_here = backend.rank_per_process ? processes : settings_.mesh.size();
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const double memory = static_cast<double>(pages) * static_cast<double>(page);
  const double needed = bytes_per_rank_ * ranks_here;
  if (needed > memory / 2) {
    throw InvalidArgument(
        named("model") + " " + settings_.model_given + " with " + named("batch") + " " +
        std::to_string(settings_.training.batch) + " on " + std::to_string(settings_.mesh.size()) +
        " ranks" +
        (processes > 1 ? " (" + std::to_string(processes) + " processes on this machine)"
                       : std::string()) +
        " needs about " +
        shardwise::detail::with_thousands(needed > 9e18 ? INT64_MAX
                                                        : static_cast<std::int64_t>(needed)) +
        " bytes of buffers; this machine has " +
        shardwise::detail::with_thousands(static_cast<std::int64_t>(memory)) +
        " bytes of memory, and a run may use half");
  }
}

void TrainingJob::run(const BackendInfo& backend, JobObserver& observer) const {
  run_on_ranks(backend, static_cast<int>(settings_.mesh.size()),
               [&](Communicator& comm) { run_rank(comm, observer); });
}

void TrainingJob::run_rank(Communicator& comm, JobObserver& observer) const {
  const JobSettings& s = settings_;
  const SettingNames& named = s.names;
  const TrainSettings& t = s.training;
  if (comm.size() != s.mesh.size()) {
    throw InvalidArgument(named("mesh") + " " + s.mesh.to_string() + " has " +
                          std::to_string(s.mesh.size()) + " devices but the job has " +
                          std::to_string(comm.size()) + " ranks");
  }
  // What ranks compare is every spec, however it was asked for.
  std::string sharding_specs;
  for (const PartitionSpec& spec : layout_.placements) sharding_specs += spec.to_string();
  if (layout_.shardings) {
    sharding_specs += "|";
    for (const PartitionSpec& spec : layout_.shardings->specs) sharding_specs += spec.to_string();
  }
  std::vector<std::pair<std::string, std::string>> agreed{
      {named("model"), s.model->family() + ":" + s.model->config_json()},
      {named("mesh"), s.mesh.to_string()},
      {named("zero"), std::to_string(t.zero)},
      {named("steps"), std::to_string(t.steps)},
      {named("batch"), std::to_string(t.batch)},
      {named("seq"), std::to_string(t.seq)},
      {named("learning_rate"), std::to_string(std::bit_cast<std::uint32_t>(t.learning_rate))},
      {named("warmup"), std::to_string(t.warmup)},
      {named("seed"), std::to_string(t.seed)},
      {named("data"), std::to_string(corpus_->fingerprint())},
      {named("eval_every"), std::to_string(s.eval_every)},
      {named("overlap"), on_off(!t.overlap)},
      {named("sequence_parallel"), on_off(s.sequence_parallel)},
      {named("recompute"), to_string(s.recompute)},
      {named("precision"), to_string(s.precision)},
      {named("reduce_dtype"), float_dtype_name(t.reduce_dtype)},
      {named("residual_dtype"), float_dtype_name(s.residual_dtype)},
      {named("capacity_factor"), std::to_string(std::bit_cast<std::uint64_t>(s.capacity_factor))},
      {named("expert_bias_rate"), std::to_string(std::bit_cast<std::uint64_t>(s.expert_bias_rate))},
      {named("param_sharding"), sharding_specs},
      {named("backend"), comm.backend()},
      {named("threads"), std::to_string(s.threads)},
      {named("blas"), kernels::blas_description()},
      {named("log_dir"), s.log_dir ? "given" : "not given"},
      {named("schedule"), pipeline_ ? to_string(*pipeline_) : "none"},
      {named("timeline"), s.timeline ? "given" : "not given"},
      {named("save"), s.checkpoints.save.value_or("")},
      {named("save_every"), std::to_string(s.checkpoints.save_every)},
      {named("keep"), std::to_string(s.checkpoints.keep)},
      {named("save_async"), on_off(s.checkpoints.save_async)},
      {named("resume"), s.checkpoints.resume.value_or("")},
      {named("init_from"), s.checkpoints.init_from ? s.checkpoints.init_from_words : ""}};
  agreed.insert(agreed.end(), s.caller_settings.begin(), s.caller_settings.end());
  check_ranks_agree(comm, agreed);
  // Every pipeline message has a tag of its own; a backend bounds them (MPI guarantees only
  // 32767), and a schedule past the bound is refused before the first step, naming its flags.
  if (pipeline_) {
    const std::int64_t stages = degree_of(s.mesh, kPipelineAxis);
    const std::int64_t needed =
        pipeline_max_tag(stages * pipeline_->virtual_stages, pipeline_->microbatches);
    if (needed > comm.max_tag()) {
      throw InvalidArgument(
          named("microbatches") + " " + std::to_string(pipeline_->microbatches) + " x " +
          named("virtual_stages") + " " + std::to_string(pipeline_->virtual_stages) + " x " +
          std::to_string(stages) + " pipeline stages need message tags up to " +
          std::to_string(needed) + "; the " + comm.backend() + " backend takes tags up to " +
          std::to_string(comm.max_tag()) + ": give fewer micro-batches or model chunks");
    }
  }
  if (s.threads > 0) kernels::set_blas_threads(s.threads);
  train_rank(comm, observer);
}

JobPlan TrainingJob::describe_plan(const ParallelContext& context, DistributedModel& model,
                                   const TrainSettings& settings,
                                   const ParameterShardings* whole_shardings) const {
  const JobSettings& s = settings_;
  JobPlan plan;
  plan.mesh = s.mesh.to_string();
  plan.ranks = static_cast<int>(s.mesh.size());
  plan.backend = context.world().backend();
  plan.model = s.model->describe();
  plan.layers = s.model->layers();
  for (const ParameterSpec& spec : layout_.blocks) {
    plan.parameters += static_cast<std::size_t>(num_elements(spec.whole_shape()));
  }
  plan.batch = settings.batch;
  plan.seq = settings.seq;
  plan.data_parallel = context.data_parallel_size();
  plan.model_parallel = context.degree(kModelAxis);
  plan.sequence_parallel = s.sequence_parallel;
  plan.precision = s.precision;
  plan.reduce_dtype = settings.reduce_dtype;
  plan.residual_dtype = s.residual_dtype;
  plan.sharding = sharding_plan(settings.zero, context, model.parameters().units().size());
  plan.pipeline = pipeline_;
  if (pipeline_) {
    const std::int64_t stages = context.degree(kPipelineAxis);
    plan.published_bubble = build_schedule(pipeline_->schedule, stages, pipeline_->microbatches,
                                           pipeline_->virtual_stages)
                                .bubble_fraction();
    const std::size_t axis = s.mesh.axis_index(kPipelineAxis);
    for (std::int64_t stage = 0; stage < stages; ++stage) {
      StagePlan stage_plan;
      for (std::int64_t r = 0; r < s.mesh.size(); ++r) {
        if (s.mesh.coords_at(r)[axis] == stage) stage_plan.ranks.push_back(r);
      }
      stage_plan.chunks = stage_chunks(s.model->layers(), *pipeline_, stages, stage);
      plan.stages.push_back(std::move(stage_plan));
    }
  }
  plan.rows = parameter_plan_rows(layout_.blocks, s.model->parameter_layers(), layout_.placements,
                                  whole_shardings);
  if (whole_shardings != nullptr) plan.notes = whole_shardings->notes;
  return plan;
}

JobSummary TrainingJob::summarise(const ParallelContext& context, Trainer& trainer,
                                  DistributedModel& model, std::size_t parameters,
                                  std::int64_t first_step, float loss, double seconds,
                                  const std::map<std::string, std::int64_t>& per_axes) const {
  const JobSettings& s = settings_;
  const SettingNames& named = s.names;
  const TrainSettings& settings = s.training;
  Communicator& comm = context.world();
  const bool speaks = comm.rank() == 0;
  const std::int64_t steps_run = std::max<std::int64_t>(0, settings.steps - first_step + 1);
  // Every rank's bytes and its last schedule, to every rank.
  const PipelineStepResult& schedule = model.last_schedule();
  constexpr std::size_t kFields = 12;
  const std::int64_t mine[kFields] = {
      static_cast<std::int64_t>(trainer.params_bytes()),
      static_cast<std::int64_t>(trainer.grads_bytes()),
      static_cast<std::int64_t>(trainer.optimizer_bytes()),
      static_cast<std::int64_t>(model.activation_bytes()),
      static_cast<std::int64_t>(trainer.gathered_peak_bytes()),
      context.coordinate(kPipelineAxis),
      static_cast<std::int64_t>(schedule.busy_seconds() * 1e9),
      static_cast<std::int64_t>(schedule.elapsed_seconds() * 1e9),
      static_cast<std::int64_t>(model.parameters().compute_peak_bytes()),
      static_cast<std::int64_t>(model.expert_rows().routed),
      static_cast<std::int64_t>(model.expert_rows().computed),
      static_cast<std::int64_t>(model.expert_rows().dropped)};
  std::vector<std::int64_t> all(kFields * static_cast<std::size_t>(comm.size()));
  comm.all_gather(mine, all.data(), kFields, DType::kI64, world_group(comm.size()));
  JobSummary summary;
  summary.parameters = parameters;
  summary.steps = settings.steps;
  summary.first_step = first_step;
  summary.steps_run = steps_run;
  summary.final_loss = loss;
  summary.tokens_per_s =
      static_cast<double>(settings.batch * settings.seq * static_cast<std::size_t>(steps_run)) /
      seconds;
  summary.blas = kernels::blas_description();
  summary.pipelined = pipeline_.has_value();
  std::vector<double> busy, elapsed;
  for (int r = 0; r < comm.size(); ++r) {
    const std::int64_t* b = all.data() + kFields * static_cast<std::size_t>(r);
    summary.ranks.push_back({b[0], b[1], b[2], b[3], b[4], b[5], b[8], b[9], b[10], b[11]});
    busy.push_back(static_cast<double>(b[6]));
    elapsed.push_back(static_cast<double>(b[7]));
  }
  // Ranks of one pipeline stage route alike; the imbalance is among those holding MoE layers.
  double routed = 0, busiest = 0, holders = 0, dropped = 0;
  for (const RankReport& rank : summary.ranks) {
    if (rank.routed_rows == 0) continue;
    routed += static_cast<double>(rank.routed_rows);
    dropped += static_cast<double>(rank.dropped_rows);
    busiest = std::max(busiest, static_cast<double>(rank.expert_rows));
    holders += 1;
  }
  if (routed > 0) {
    summary.expert_imbalance = busiest / (routed / holders);
    summary.dropped_fraction = dropped / routed;
  }
  if (steps_run > 0) {
    for (const auto& [axes, bytes] : per_axes)
      summary.comm_bytes_per_step[axes] = bytes / steps_run;
  }
  if (pipeline_ && steps_run > 0) {
    summary.pipeline = pipeline_report(*pipeline_, summary.ranks, busy, elapsed);
  }
  // The last step's executed timeline, every rank's, to rank 0's file.
  if (s.timeline && pipeline_ && steps_run > 0) {
    const std::int64_t stages = context.degree(kPipelineAxis);
    const std::size_t length = most_actions(*pipeline_, stages);
    const std::vector<double> own = timeline_fields(schedule, length);
    std::vector<double> every(own.size() * static_cast<std::size_t>(comm.size()));
    comm.all_gather(own.data(), every.data(), own.size(), DType::kF64, world_group(comm.size()));
    if (speaks) {
      std::vector<std::int64_t> stage_of;
      for (const RankReport& rank : summary.ranks) stage_of.push_back(rank.stage);
      shardwise::detail::write_whole_file(
          *s.timeline, timeline_json(*pipeline_, stages, every, length, stage_of) + "\n",
          shardwise::detail::IfExists::kReplaceFile, named("timeline"));
    }
  }
  return summary;
}

void TrainingJob::train_rank(Communicator& comm, JobObserver& observer) const {
  const JobSettings& s = settings_;
  const bool speaks = comm.rank() == 0;
  ParallelContext context(comm, s.mesh);
  // The stages' clocks start together only where a timeline is drawn from them.
  DistributedModel model(
      s.model, s.training.seed, context,
      {layout_.placements, s.sequence_parallel, s.recompute, pipeline_, s.timeline.has_value(),
       s.precision, s.residual_dtype, s.capacity_factor, s.expert_bias_rate});
  // A pipeline stage's ZeRO shards those of its own parameters.
  TrainSettings settings = s.training;
  settings.gather_dtype = s.precision == Precision::kBf16 ? DType::kBF16 : DType::kF32;
  settings.shardings = layout_.shardings;
  if (pipeline_ && settings.shardings) {
    settings.shardings =
        shardings_held(*settings.shardings, layout_.blocks, model.parameters().specs());
  }
  Trainer trainer(context, model, *corpus_, settings);
  const ParameterShardings* whole_shardings =
      layout_.shardings ? &*layout_.shardings : trainer.shardings();
  const JobPlan plan = describe_plan(context, model, settings, whole_shardings);
  std::string run_config;  // config.json's text, for the logs and the checkpoints
  if ((s.log_dir && speaks) || s.checkpoints.save || s.checkpoints.resume) {
    run_config = run_config_json({&s, &pipeline_, comm.backend(), kernels::blas_description(),
                                  corpus_->train_tokens(), corpus_->val_tokens(),
                                  corpus_->fingerprint(), plan.sharding, plan.rows, plan.notes});
  }
  CheckpointManager checkpoints(s.checkpoints, comm, trainer, checkpointed_model(s.model),
                                run_config, [&](const std::string& line) {
                                  if (speaks) observer.note(line);
                                });
  if (speaks) {
    observer.started(plan);
    for (const std::string& line : corpus_->notes()) observer.note(line);
    if (s.precision == Precision::kBf16) {
      if (const std::string emulated = kernels::bf16_emulation_note(); !emulated.empty()) {
        observer.note(emulated);
      }
    }
  }
  // What this rank sent along each axes in training steps (not in validation).
  std::map<std::string, std::int64_t> per_axes;
  const auto add_sent = [&](std::int64_t sign) {
    for (const auto& [axes, sent] : context.bytes_sent_by_axes()) per_axes[axes] += sign * sent;
  };
  const std::int64_t first_step = checkpoints.resume() + 1;
  // The logs are made once nothing can refuse the run any more (the lock, the checkpoint's
  // checks): a refused run leaves no log folder to refuse its retry.
  std::unique_ptr<RunLog> log;
  if (s.log_dir && speaks) {
    log = std::make_unique<RunLog>(*s.log_dir, run_config);
    observer.logging(*s.log_dir);
  }
  std::vector<RankMemory> memory(static_cast<std::size_t>(comm.size()));
  const auto start = Clock::now();
  float loss = 0;
  for (std::int64_t step = first_step; step <= settings.steps; ++step) {
    const auto before = Clock::now();
    add_sent(-1);
    const StepStats stats = trainer.step();
    add_sent(+1);
    StepReport report;
    report.step = step;
    report.steps = settings.steps;
    report.first_step = first_step;
    report.loss = stats.loss;
    report.learning_rate = stats.learning_rate;
    report.grad_norm = stats.grad_norm;
    report.seconds = std::chrono::duration<double>(Clock::now() - before).count();
    report.tokens_per_s = static_cast<double>(settings.batch * settings.seq) / report.seconds;
    loss = stats.loss;
    if (s.eval_every > 0 && step % s.eval_every == 0) {
      report.val_loss = trainer.validation_loss(s.eval_batches);
    }
    if (s.log_dir) {
      const RankMemory mine{
          static_cast<std::int64_t>(trainer.params_bytes() + trainer.grads_bytes() +
                                    trainer.optimizer_bytes() + model.activation_bytes() +
                                    trainer.gathered_peak_bytes() +
                                    model.parameters().compute_peak_bytes()),
          resident_bytes()};
      comm.all_gather(&mine, memory.data(), 2, DType::kI64, world_group(comm.size()));
      if (log) log->record(step, step_scalars(report, memory));
    }
    checkpoints.after_step(step, settings.steps);
    report.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (speaks) observer.step(report);
  }
  checkpoints.finish();
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  const JobSummary summary =
      summarise(context, trainer, model, plan.parameters, first_step, loss, total, per_axes);
  if (speaks) observer.finished(summary);
}

}  // namespace shardwise::train

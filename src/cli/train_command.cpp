// `shardwise train`: the GPT trained through the training layer, on one rank or a data x fsdp
// mesh of ranks (threads, or processes under mpirun), printing progress for a person or one JSON
// object per line.
#include <CLI/CLI.hpp>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "../detail/output_file.hpp"
#include "backend_flag.hpp"
#include "blas_flag.hpp"
#include "command.hpp"
#include "model_argument.hpp"
#include "number_text.hpp"
#include "shardwise/comm/backend_choice.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/kernels/blas_library.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/plan/cost_model.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/train/placement.hpp"
#include "shardwise/train/run_log.hpp"
#include "shardwise/train/settings_agreement.hpp"
#include "shardwise/train/trainer.hpp"
#include "text_table.hpp"
#include "train_checkpoint.hpp"
#include "train_layout.hpp"
#include "train_log.hpp"
#include "train_pipeline.hpp"

namespace shardwise::cli {
namespace {

// Where the GPT's parameters go: the placement over the mesh of each (gpt_parameters order), the
// block a rank holds of each after the model axis, and the pipeline's stages.
struct TrainLayout {
  const std::vector<PartitionSpec>& placements;
  const std::vector<train::ParameterSpec>& blocks;
  const std::optional<models::GptPipeline>& pipeline;
  Recompute recompute;
};

using Clock = std::chrono::steady_clock;

// --mesh: axes data, fsdp and model, rank r on device r.
Mesh train_mesh(const std::optional<std::string>& text) {
  if (!text) return Mesh({"data"}, {1});
  Mesh mesh({"data"}, {1});
  try {
    mesh = Mesh::parse(*text);
  } catch (const Error& e) {  // a ParseError or an InvalidArgument
    throw InvalidArgument(std::string("--mesh: ") + e.what());
  }
  for (const std::string& axis : mesh.axis_names()) {
    if (axis != "data" && axis != "fsdp" && axis != "model" && axis != "pipeline") {
      throw InvalidArgument("--mesh: axis '" + axis +
                            "' is not one `shardwise train` runs (data, fsdp, model, pipeline)");
    }
  }
  if (!mesh.has_default_device_ids()) {
    throw InvalidArgument("--mesh: " + mesh.to_string() +
                          " names devices; `shardwise train` runs rank r as device r, so give "
                          "the axes only");
  }
  return mesh;
}

// What one rank holds, as the planner predicts it for this run (the trainer's fp32 state after
// ZeRO, its activations and gathered units): one count for the planner and this check.
double bytes_per_rank(const models::GptConfig& config, const Mesh& mesh,
                      const train::TrainSettings& settings, bool sequence_parallel,
                      const std::optional<models::GptPipeline>& pipeline, Recompute recompute) {
  const auto ranks = static_cast<std::int64_t>(mesh.size());
  plan::Layout layout;
  layout.zero = settings.zero;
  // At ZeRO 0 an fsdp axis is one more data axis.
  layout.fsdp = settings.zero > 0 && mesh.has_axis("fsdp") ? mesh.axis_size("fsdp") : 1;
  layout.model = mesh.has_axis("model") ? mesh.axis_size("model") : 1;
  layout.pipeline = mesh.has_axis("pipeline") ? mesh.axis_size("pipeline") : 1;
  layout.data = ranks / (layout.fsdp * layout.model * layout.pipeline);
  if (pipeline) {
    layout.microbatches = pipeline->microbatches;
    layout.virtual_stages = pipeline->virtual_stages;
    // The stages as the trainer splits them, uneven ones too.
    for (const train::LayerRange& range :
         train::virtual_stage_ranges(config.n_layer, *pipeline, layout.pipeline)) {
      layout.stage_layers.push_back(static_cast<std::int64_t>(range.end_layer - range.first_layer));
    }
    layout.schedule = pipeline->schedule;
  }
  layout.sequence_parallel = sequence_parallel;
  layout.recompute = recompute;
  plan::TrainingSetup setup;
  setup.global_batch = static_cast<std::int64_t>(settings.batch);
  setup.seq = static_cast<std::int64_t>(settings.seq);
  setup.micro_batch = setup.global_batch / (layout.data * layout.fsdp) / layout.microbatches;
  setup.precision = plan::Precision::kFp32;
  plan::Cluster cluster;  // only the memory counts here
  cluster.devices = ranks;
  cluster.devices_per_node = ranks;
  cluster.memory_bytes = std::numeric_limits<std::int64_t>::max();
  cluster.peak_flops_fp32 = cluster.peak_flops_bf16 = 1;
  cluster.intra_node = cluster.inter_node = {1, 0};
  const plan::ModelShape shape = plan::shape_of(models::gpt_manifest(config));
  return static_cast<double>(plan::evaluate(shape, cluster, setup, layout).memory.total());
}

// The --data file (and --val-data, in the same format) as the corpus: read where batches need
// it, never whole, every id checked against the model's vocabulary as it is drawn.
train::Corpus corpus_from(const std::string& data, const std::optional<std::string>& val_data,
                          train::TokenFormat format, std::size_t seq, std::size_t vocab) {
  auto train = train::file_source(data, format, "--data");
  auto held_out = val_data ? train::file_source(*val_data, format, "--val-data") : nullptr;
  return {std::move(train), std::move(held_out), seq, vocab};
}

std::string bytes_text(std::size_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (bytes >= (std::size_t{1} << 20)) {
    out << static_cast<double>(bytes) / (1 << 20) << " MiB";
  } else {
    out << static_cast<double>(bytes) / 1024 << " KiB";
  }
  return out.str();
}

class TrainCommand final : public Command {
 public:
  explicit TrainCommand(CLI::App& parent)
      : app_(parent.add_subcommand("train",
                                   "Train the GPT on text or token files, on one rank or any "
                                   "mesh of data, fsdp, model and pipeline axes, matching the "
                                   "one-rank run step for step")) {
    app_->add_option("--model", model_, "tiny, small, gpt2 or a JSON file")->default_val("tiny");
    app_->add_option("--mesh", mesh_,
                     "The mesh of data, fsdp, model and pipeline axes, e.g. data=2,fsdp=2 (one "
                     "rank without)");
    app_->add_option(
            "--zero", zero_,
            "ZeRO stage: 0 (plain data parallel), 1 (optimizer state sharded), 2 (+ gradients "
            "reduce-scattered after backward) or 3 (+ parameters, gathered per layer)")
        ->default_val("0");
    app_->add_option("--steps", steps_, "Training steps")->default_val("100");
    app_->add_option("--batch", batch_, "Global sequences per step")->default_val("8");
    app_->add_option("--seq", seq_, "Tokens per sequence (default: the model's context)");
    app_->add_option("--lr", lr_, "Peak learning rate")->default_val("1e-3");
    app_->add_option("--warmup", warmup_, "Warm-up steps (default: 10, at most --steps)");
    app_->add_option("--seed", seed_, "Seed of the initialisation and of the batches")
        ->default_val("1337");
    app_->add_option("--data", data_,
                     "Training data of any size: a text file (its bytes are the tokens) or a "
                     "token file (--data-format); default: a built-in corpus");
    app_->add_option("--data-format", data_format_,
                     "text (bytes), tokens-u16 or tokens-u32 (nanoGPT's train.bin: little-endian "
                     "ids, checked against the vocabulary)")
        ->default_val("text");
    app_->add_option("--val-data", val_data_,
                     "Held-out data in the same format (default: the last tenth of --data)");
    app_->add_option("--eval-every", eval_every_, "Validation loss every K steps (0: never)")
        ->default_val("0");
    app_->add_option("--threads", threads_, "BLAS threads per rank (default 1 with several ranks)");
    add_blas_option(*app_, blas_);
    app_->add_option("--backend", backend_, "local or mpi (default: mpi under mpirun)");
    app_->add_option("--param-sharding", param_sharding_,
                     "How ZeRO splits each parameter: first-dim (FSDP's dimension 0, as FSDP2), "
                     "logical-axes (FSDP's rules on the model's logical axes) or a rules file "
                     "(as `shardwise specs --rules` reads)")
        ->default_val("first-dim");
    app_->add_flag("--sequence-parallel", sequence_parallel_,
                   "Split LayerNorm and residual activations along the sequence over the model "
                   "axis (Korthikanti et al.): all-gathers and reduce-scatters replace its "
                   "all-reduces");
    app_->add_option("--recompute", recompute_,
                     "What a layer keeps for backward: none, selective (the same: attention "
                     "never keeps its seq x seq weights) or full (each layer's input only; the "
                     "layer runs again in backward)")
        ->default_val("none");
    app_->add_flag("--no-overlap", no_overlap_,
                   "Reduce gradients only after backward and gather no ZeRO-3 unit ahead (to "
                   "measure what overlap hides)");
    app_->add_option("--schedule", pipeline_flags_.schedule,
                     "Pipeline schedule over the mesh's pipeline axis: gpipe, 1f1b or "
                     "interleaved")
        ->default_val("1f1b");
    app_->add_option("--microbatches", pipeline_flags_.microbatches,
                     "Micro-batches per step on each data-parallel rank (default: the fewest, at "
                     "least one per stage, that divide the rank's sequences)");
    app_->add_option("--virtual-stages", pipeline_flags_.virtual_stages,
                     "Model chunks per pipeline rank (interleaved; default 2)");
    app_->add_option("--stages-by", pipeline_flags_.stages_by,
                     "How layers go to stages: count (equal counts, the first stages taking the "
                     "remainder) or cost (the slowest stage as fast as possible, the head's "
                     "FLOPs counted on the last)")
        ->default_val("count");
    app_->add_option("--timeline", timeline_,
                     "Write the last step's executed pipeline timeline (every rank's passes with "
                     "their start and end) as JSON; `shardwise schedule --from FILE` draws it");
    app_->add_flag("--json", json_, "One JSON object per line");
    app_->add_option("--log-dir", log_dir_,
                     "Keep the run's logs in this folder (rank 0 writes): TensorBoard event files "
                     "(tensorboard --logdir DIR), metrics.jsonl with the same numbers, and "
                     "config.json, every setting resolved");
    app_->add_option("--save", checkpoint_flags_.save,
                     "Save the training state into this folder, one sharded checkpoint per save "
                     "(PATH/step-00000100), written by every rank at once");
    app_->add_option("--save-every", save_every_,
                     "Save every N steps (default: at the last step only)")
        ->default_val("0");
    app_->add_option("--keep", keep_,
                     "Keep this run's newest K checkpoints in --save (default: every one)")
        ->default_val("0");
    app_->add_flag("--save-async", checkpoint_flags_.save_async,
                   "Copy the state to memory and write it while training goes on");
    app_->add_option("--resume", checkpoint_flags_.resume,
                     "Continue from a checkpoint (or the newest in a --save folder), saved on "
                     "any layout; on the same layout the run continues bit for bit");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }
  // Progress is printed as the run goes.
  [[nodiscard]] bool streams() const override { return true; }

  void run(std::ostream& out) const override {
    const models::GptConfig config = gpt_model_config(model_, "--model");
    const train::TokenFormat format = train::parse_token_format(data_format_, "--data-format");
    if (format == train::TokenFormat::kText && config.vocab_size < 256) {
      throw InvalidArgument("--model: vocab_size " + std::to_string(config.vocab_size) +
                            " is below 256, the byte tokens' vocabulary");
    }
    if (!data_ && (val_data_ || app_->get_option("--data-format")->count() > 0)) {
      throw InvalidArgument(std::string(val_data_ ? "--val-data" : "--data-format") +
                            " describes --data, which is not given (the built-in corpus is "
                            "text)");
    }
    const Mesh mesh = train_mesh(mesh_);
    const int ranks = static_cast<int>(mesh.size());
    train::TrainSettings settings;
    settings.steps = bounded(steps_, "--steps", 1, 10'000'000);
    settings.batch = static_cast<std::size_t>(bounded(batch_, "--batch", 1, 65536));
    settings.seq = seq_ ? static_cast<std::size_t>(bounded(
                              *seq_, "--seq", 1, static_cast<std::int64_t>(config.block_size)))
                        : config.block_size;
    settings.learning_rate = static_cast<float>(finite_number(lr_, "--lr"));
    if (!(settings.learning_rate > 0 && settings.learning_rate <= 1)) {
      throw InvalidArgument("--lr is " + lr_ + "; expected more than 0 and at most 1");
    }
    settings.warmup = warmup_ ? bounded(*warmup_, "--warmup", 0, settings.steps)
                              : std::min<std::int64_t>(10, settings.steps);
    settings.seed = static_cast<std::uint64_t>(bounded(seed_, "--seed", 0, INT64_MAX));
    settings.zero = static_cast<int>(bounded(zero_, "--zero", 0, 3));
    settings.overlap = !no_overlap_;
    const std::int64_t eval_every = bounded(eval_every_, "--eval-every", 0, settings.steps);
    train::CheckpointPolicy checkpoint_flags = checkpoint_flags_;
    checkpoint_flags.save_every = integer(save_every_, "--save-every");
    checkpoint_flags.keep = integer(keep_, "--keep");
    const Recompute recompute = parse_recompute(recompute_, "--recompute");
    if (checkpoint_flags.resume && checkpoint_flags.resume->empty()) {
      throw InvalidArgument("--resume is an empty path");
    }
    const train::ResumePoint resume =
        train::check_resume(checkpoint_flags, gpt_checkpointed_model(config), settings.steps);
    train::check_checkpoint_policy(checkpoint_flags, settings.steps, resume);
    const int threads =
        threads_ ? static_cast<int>(bounded(*threads_, "--threads", 1, 256)) : (ranks > 1 ? 1 : 0);
    const ScopedBlas blas(blas_);
    train::check_settings(
        settings, static_cast<std::size_t>(train::ParallelContext::data_parallel_size_of(mesh)));
    const std::int64_t model_degree = mesh.has_axis("model") ? mesh.axis_size("model") : 1;
    if (sequence_parallel_ && model_degree == 1) {
      throw InvalidArgument("--sequence-parallel splits the sequence over the model axis; --mesh " +
                            mesh.to_string() + " has none");
    }
    if (sequence_parallel_ && settings.seq % static_cast<std::size_t>(model_degree) != 0) {
      throw InvalidArgument("--sequence-parallel: --seq " + std::to_string(settings.seq) +
                            " does not divide among the " + std::to_string(model_degree) +
                            " model ranks");
    }
    PipelineFlags pipeline_flags = pipeline_flags_;
    for (const char* flag : {"--schedule", "--microbatches", "--virtual-stages", "--stages-by"}) {
      pipeline_flags.any_given = pipeline_flags.any_given || app_->get_option(flag)->count() > 0;
    }
    const std::optional<models::GptPipeline> pipeline =
        resolve_pipeline(pipeline_flags, config, mesh, settings);
    if (timeline_ && !pipeline) {
      throw InvalidArgument("--timeline writes the pipeline's executed schedule; --mesh " +
                            mesh.to_string() + " has no pipeline axis of more than one rank");
    }
    if (log_dir_) train::RunLog::check_folder(*log_dir_);
    // A timeline that could not be written is found now, not after the run, and nothing is
    // made for it yet (a symlink or FIFO there is refused, never opened).
    if (timeline_) {
      shardwise::detail::check_output_path(*timeline_, shardwise::detail::IfExists::kReplaceFile,
                                           "--timeline");
    }
    const BackendInfo& backend = backend_from(backend_);
    const std::string run_text =
        "--model " + model_ + " with --batch " + batch_ + " on " + std::to_string(ranks) + " ranks";
    // Where every parameter goes: the model axis splits it for good (from the rules: those of
    // a rules file, else the strategies'), ZeRO splits the block further as --param-sharding
    // says. What ranks compare is every spec, however it was asked for.
    const std::optional<ShardingRules> file_rules =
        read_param_sharding_rules(param_sharding_, mesh);
    const ShardingRules defaults = default_sharding_rules(ParallelismConfig::from_mesh(mesh));
    const ShardingRules& rules = file_rules ? *file_rules : defaults;
    const std::vector<train::ParameterSpec> whole = models::gpt_parameters(config);
    std::vector<PartitionSpec> placements;
    std::vector<train::ParameterSpec> blocks;
    try {
      placements = train::model_placements(whole, mesh, rules.axis_rules, rules.name_rules);
      // Every model rank's blocks have the same shapes; ZeRO splits them alike.
      blocks = train::local_parameters(whole, mesh, 0, placements);
      train::check_model_placements(
          models::GptDefinition(config),
          mesh.has_axis("model") ? static_cast<int>(mesh.axis_size("model")) : 1, placements);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("--mesh " + mesh.to_string() + ": " + e.what());
    }
    double per_rank = 0;
    try {
      per_rank = bytes_per_rank(config, mesh, settings, sequence_parallel_, pipeline, recompute);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(run_text + ": " + e.what());
    }
    // Every rank on this machine counts: the threads of this process, or the processes the
    // launcher started here.
    const double on_this_node =
        per_rank * (backend.rank_per_process ? processes_on_this_node() : ranks);
    check_fits(on_this_node > 9e18 ? INT64_MAX : static_cast<std::int64_t>(on_this_node),
               run_text + (backend.rank_per_process && processes_on_this_node() > 1
                               ? " (" + std::to_string(processes_on_this_node()) +
                                     " processes on this machine)"
                               : std::string()));
    std::string sharding_specs;
    for (const PartitionSpec& spec : placements) sharding_specs += spec.to_string();
    if (settings.zero > 0) {
      settings.shardings = zero_shardings(param_sharding_, blocks, mesh, file_rules);
      sharding_specs += "|";
      for (const PartitionSpec& spec : settings.shardings->specs)
        sharding_specs += spec.to_string();
    } else if (param_sharding_ != "first-dim") {
      throw InvalidArgument("--param-sharding " + param_sharding_ +
                            " needs --zero 1, 2 or 3 (with --zero 0 nothing is sharded)");
    }
    const train::Corpus corpus =
        data_ ? corpus_from(*data_, val_data_, format, settings.seq, config.vocab_size)
              : train::Corpus::builtin(settings.seq);
    std::mutex mutex;
    // Input found bad on a rank (a token file's id outside the vocabulary, drawn at step 900)
    // stays the user's error, not the runtime's: the first such message, with its rank.
    std::optional<std::string> input_error;
    try {
      backend.run(nullptr, nullptr, ranks, [&](Communicator& comm) {
        try {
          train_process(comm, mesh, config, {placements, blocks, pipeline, recompute}, settings,
                        checkpoint_flags, corpus, eval_every, threads, sharding_specs, backend.name,
                        out, mutex);
        } catch (const CommError&) {
          throw;
        } catch (const Error& e) {
          const std::lock_guard lock(mutex);
          if (!input_error) {
            input_error = (ranks > 1 && !backend.rank_per_process
                               ? "rank " + std::to_string(comm.rank()) + ": "
                               : std::string()) +
                          e.what();
          }
          throw;
        }
      });
    } catch (const CommError&) {
      if (input_error) throw InvalidArgument(*input_error);
      throw;
    } catch (const Error&) {
      // Every rank failed alike (a checkpoint they all found wrong): the rank's message.
      if (input_error) throw InvalidArgument(*input_error);
      throw;
    }
  }

 private:
  // One rank's run: the settings every process must share compared, then its training.
  void train_process(Communicator& comm, const Mesh& mesh, const models::GptConfig& config,
                     const TrainLayout& layout, const train::TrainSettings& settings,
                     const train::CheckpointPolicy& checkpoint_flags, const train::Corpus& corpus,
                     std::int64_t eval_every, int threads, const std::string& sharding_specs,
                     const std::string& backend_name, std::ostream& out, std::mutex& mutex) const {
    const int ranks = static_cast<int>(mesh.size());
    if (comm.size() != ranks) {
      throw InvalidArgument("--mesh " + mesh.to_string() + " has " + std::to_string(ranks) +
                            " devices but the job has " + std::to_string(comm.size()) + " ranks");
    }
    train::check_ranks_agree(
        comm,
        {{"--model", std::to_string(config.n_layer) + "," + std::to_string(config.n_head) + "," +
                         std::to_string(config.n_embd) + "," + std::to_string(config.block_size) +
                         "," + std::to_string(config.vocab_size)},
         {"--mesh", mesh.to_string()},
         {"--zero", std::to_string(settings.zero)},
         {"--steps", std::to_string(settings.steps)},
         {"--batch", std::to_string(settings.batch)},
         {"--seq", std::to_string(settings.seq)},
         {"--lr", std::to_string(std::bit_cast<std::uint32_t>(settings.learning_rate))},
         {"--warmup", std::to_string(settings.warmup)},
         {"--seed", std::to_string(settings.seed)},
         {"--data", std::to_string(corpus.fingerprint())},
         {"--eval-every", std::to_string(eval_every)},
         {"--no-overlap", settings.overlap ? "off" : "on"},
         {"--sequence-parallel", sequence_parallel_ ? "on" : "off"},
         {"--recompute", recompute_},
         {"--param-sharding", sharding_specs},
         {"--backend", backend_name},
         {"--threads", std::to_string(threads)},
         {"--blas", kernels::blas_description()},
         {"--json", json_ ? "on" : "off"},
         {"--log-dir", log_dir_ ? "given" : "not given"},
         {"--schedule", pipeline_text(layout.pipeline)},
         {"--timeline", timeline_ ? "given" : "not given"},
         {"--save", checkpoint_flags.save.value_or("")},
         {"--save-every", std::to_string(checkpoint_flags.save_every)},
         {"--keep", std::to_string(checkpoint_flags.keep)},
         {"--save-async", checkpoint_flags.save_async ? "on" : "off"},
         {"--resume", checkpoint_flags.resume.value_or("")}});
    if (threads > 0) kernels::set_blas_threads(threads);
    train_rank(comm, mesh, config, layout, settings, checkpoint_flags, corpus, eval_every, out,
               mutex, backend_name, threads);
  }

  void train_rank(Communicator& comm, const Mesh& mesh, const models::GptConfig& config,
                  const TrainLayout& layout, const train::TrainSettings& whole_settings,
                  const train::CheckpointPolicy& checkpoint_flags, const train::Corpus& corpus,
                  std::int64_t eval_every, std::ostream& out, std::mutex& mutex,
                  const std::string& backend_name, int threads) const {
    const bool speaks = comm.rank() == 0;
    train::ParallelContext context(comm, mesh);
    const std::vector<PartitionSpec>& placements = layout.placements;
    models::GptModel model(config, whole_settings.seed, context, placements, sequence_parallel_,
                           layout.pipeline);
    model.set_recompute(layout.recompute);
    // A pipeline stage's ZeRO shards those of its own parameters.
    train::TrainSettings settings = whole_settings;
    if (layout.pipeline && settings.shardings) {
      settings.shardings =
          shardings_held(*settings.shardings, layout.blocks, model.parameters().specs());
    }
    train::Trainer trainer(context, model, corpus, settings);
    std::size_t parameters = 0;  // the whole model's, not this rank's blocks
    for (const train::ParameterSpec& spec : layout.blocks) {
      parameters += static_cast<std::size_t>(num_elements(spec.whole_shape()));
    }
    // The whole model's shardings (a pipeline stage's trainer holds its own only).
    const train::ParameterShardings* whole_shardings =
        whole_settings.shardings ? &*whole_settings.shardings : trainer.shardings();
    std::unique_ptr<train::RunLog> log;
    std::string run_config;  // config.json's text, for the logs and the checkpoints
    if ((log_dir_ && speaks) || checkpoint_flags.save || checkpoint_flags.resume) {
      TrainRunDescription run{
          model_,
          config,
          &mesh,
          backend_name,
          threads,
          kernels::blas_description(),
          settings,
          eval_every,
          sequence_parallel_,
          json_,
          param_sharding_,
          data_ ? *data_ : "built-in",
          data_format_,
          val_data_,
          corpus.train_tokens(),
          corpus.val_tokens(),
          corpus.fingerprint(),
          sharding_plan(settings.zero, context, model.parameters().units().size()),
          parameter_plan_rows(layout.blocks, placements, whole_shardings),
          whole_shardings != nullptr ? whole_shardings->notes : std::vector<std::string>{},
          layout.pipeline};
      run_config = run_config_json(run);
    }
    train::CheckpointManager checkpoints(checkpoint_flags, comm, trainer,
                                         gpt_checkpointed_model(config), run_config,
                                         [&](const std::string& line) {
                                           if (!speaks || json_) return;
                                           const std::lock_guard lock(mutex);
                                           out << line << "\n";
                                           out.flush();
                                         });
    if (speaks && !json_) {
      std::lock_guard lock(mutex);
      out << "mesh " << mesh.to_string() << " (" << comm.size() << " rank"
          << (comm.size() > 1 ? "s" : "") << ", " << comm.backend() << "), GPT " << config.n_layer
          << " layers x " << config.n_embd << " wide, " << parameters << " parameters\n"
          << "plan: batch " << settings.batch << " x " << settings.seq << " tokens split among "
          << context.data_parallel_size() << " data-parallel rank"
          << (context.data_parallel_size() > 1 ? "s" : "") << " (data x fsdp)"
          << (context.degree("model") > 1
                  ? ", each layer split over " + std::to_string(context.degree("model")) +
                        " model ranks (tensor parallel" +
                        (sequence_parallel_ ? ", sequence parallel" : "") + ")"
                  : std::string())
          << "; " << sharding_plan(settings.zero, context, model.parameters().units().size())
          << "\n";
      if (layout.pipeline) {
        out << pipeline_plan(
            config, *layout.pipeline, mesh,
            settings.batch / static_cast<std::size_t>(context.data_parallel_size()));
      }
      out << parameter_plan(layout.blocks, placements, whole_shardings);
    }
    std::vector<RankMemory> memory(static_cast<std::size_t>(comm.size()));
    // What this rank sent along each axes in training steps (not in validation).
    std::map<std::string, std::int64_t> per_axes;
    const auto add_sent = [&](std::int64_t sign) {
      for (const auto& [axes, sent] : context.bytes_sent_by_axes()) per_axes[axes] += sign * sent;
    };
    const std::int64_t first_step = checkpoints.resume() + 1;
    // The logs are made once nothing can refuse the run any more (the lock, the checkpoint's
    // checks): a refused run leaves no log folder to refuse its retry.
    if (log_dir_ && speaks) {
      log = std::make_unique<train::RunLog>(*log_dir_, run_config);
      if (!json_) {
        const std::lock_guard lock(mutex);
        out << "logs: " << echo_input(*log_dir_, 200) << " (tensorboard --logdir "
            << echo_input(*log_dir_, 200) << ")\n";
      }
    }
    // 0 where --resume's checkpoint is of the last step already: nothing is trained, and no loss
    // or rate is reported.
    const std::int64_t steps_run = std::max<std::int64_t>(0, settings.steps - first_step + 1);
    const auto start = Clock::now();
    float loss = 0;
    for (std::int64_t s = first_step; s <= settings.steps; ++s) {
      const auto before = Clock::now();
      add_sent(-1);
      const train::StepStats stats = trainer.step();
      add_sent(+1);
      const double seconds = std::chrono::duration<double>(Clock::now() - before).count();
      const double tokens_per_s = static_cast<double>(settings.batch * settings.seq) / seconds;
      loss = stats.loss;
      std::optional<float> val;
      if (eval_every > 0 && s % eval_every == 0) val = trainer.validation_loss(4);
      if (log_dir_) {
        const RankMemory mine{
            static_cast<std::int64_t>(trainer.params_bytes() + trainer.grads_bytes() +
                                      trainer.optimizer_bytes() + model.activation_bytes() +
                                      trainer.gathered_peak_bytes()),
            resident_bytes()};
        comm.all_gather(&mine, memory.data(), 2, DType::kI64, world_group(comm.size()));
        if (log) log->record(s, step_scalars(stats, seconds, tokens_per_s, val, memory));
      }
      checkpoints.after_step(s, settings.steps);
      if (!speaks) continue;
      std::lock_guard lock(mutex);
      if (json_) {
        nlohmann::json line{{"step", s}, {"loss", stats.loss}, {"tokens_per_s", tokens_per_s}};
        if (val) line["val_loss"] = *val;
        out << line.dump() << '\n';
      } else {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        const double eta = elapsed / static_cast<double>(s - first_step + 1) *
                           static_cast<double>(settings.steps - s);
        out << "step " << std::setw(6) << s << "/" << settings.steps << "  loss " << std::fixed
            << std::setprecision(4) << stats.loss << (val ? "  val " : "")
            << (val ? std::to_string(*val).substr(0, 6) : "") << "  " << std::setprecision(0)
            << tokens_per_s << " tok/s  eta " << eta << " s\n";
      }
      out.flush();
    }
    checkpoints.finish();
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    // Every rank's bytes, to rank 0.
    // The pipeline's last step: this rank's stage, its passes' busy time and the time from the
    // schedule's start to its last pass (nanoseconds).
    const train::PipelineStepResult& schedule = model.last_schedule();
    constexpr std::size_t kFields = 8;
    const std::int64_t mine[kFields] = {
        static_cast<std::int64_t>(trainer.params_bytes()),
        static_cast<std::int64_t>(trainer.grads_bytes()),
        static_cast<std::int64_t>(trainer.optimizer_bytes()),
        static_cast<std::int64_t>(model.activation_bytes()),
        static_cast<std::int64_t>(trainer.gathered_peak_bytes()),
        context.coordinate(train::kPipelineAxis),
        static_cast<std::int64_t>(schedule.busy_seconds() * 1e9),
        static_cast<std::int64_t>(schedule.elapsed_seconds() * 1e9)};
    std::vector<std::int64_t> all(kFields * static_cast<std::size_t>(comm.size()));
    comm.all_gather(mine, all.data(), kFields, DType::kI64, world_group(comm.size()));
    // The last step's executed timeline, every rank's, to rank 0's file.
    if (timeline_ && layout.pipeline && steps_run > 0) {
      const std::int64_t stages = context.degree(train::kPipelineAxis);
      const std::size_t length = most_actions(*layout.pipeline, stages);
      const std::vector<double> own = timeline_fields(schedule, length);
      std::vector<double> every(own.size() * static_cast<std::size_t>(comm.size()));
      comm.all_gather(own.data(), every.data(), own.size(), DType::kF64, world_group(comm.size()));
      if (speaks) {
        std::vector<std::int64_t> stage_of;
        for (int r = 0; r < comm.size(); ++r) stage_of.push_back(all[kFields * r + 5]);
        write_text_file(*timeline_,
                        timeline_json(*layout.pipeline, stages, every, length, stage_of),
                        "--timeline");
      }
    }
    if (!speaks) return;
    std::lock_guard lock(mutex);
    const double tokens_per_s =
        static_cast<double>(settings.batch * settings.seq * static_cast<std::size_t>(steps_run)) /
        total;
    const std::string no_steps = "no steps left: the checkpoint is of step " +
                                 std::to_string(first_step - 1) + ", and --steps is " +
                                 std::to_string(settings.steps);
    if (json_) {
      nlohmann::json ranks = nlohmann::json::array();
      for (int r = 0; r < comm.size(); ++r) {
        const std::int64_t* b = all.data() + kFields * r;
        ranks.push_back({{"rank", r},
                         {"params_bytes", b[0]},
                         {"grads_bytes", b[1]},
                         {"optimizer_bytes", b[2]},
                         {"activations_peak_bytes", b[3]},
                         {"gathered_peak_bytes", b[4]}});
        if (layout.pipeline) ranks.back()["stage"] = b[5];
      }
      nlohmann::json comm_bytes = nlohmann::json::object();
      if (steps_run > 0) {
        for (const auto& [axes, bytes] : per_axes) comm_bytes[axes] = bytes / steps_run;
      }
      nlohmann::json summary{
          {"parameters", parameters},
          {"steps_run", steps_run},
          {"final_loss", steps_run > 0 ? nlohmann::json(loss) : nullptr},
          {"tokens_per_s", steps_run > 0 ? nlohmann::json(tokens_per_s) : nullptr},
          {"blas", kernels::blas_description()},
          {"ranks", ranks},
          {"comm_bytes_per_step", comm_bytes}};
      if (layout.pipeline && steps_run > 0) {
        summary["pipeline"] = pipeline_summary(*layout.pipeline, all, kFields);
      }
      out << nlohmann::json{{"summary", summary}}.dump() << '\n';
      return;
    }
    if (steps_run == 0) {
      out << "done: " << no_steps << "\n";
    } else {
      out << "done: final loss " << std::fixed << std::setprecision(4) << loss << ", "
          << std::setprecision(0) << tokens_per_s << " tok/s\n";
    }
    for (int r = 0; r < comm.size(); ++r) {
      const std::int64_t* b = all.data() + kFields * r;
      out << "rank " << r << ": params " << bytes_text(static_cast<std::size_t>(b[0])) << ", grads "
          << bytes_text(static_cast<std::size_t>(b[1])) << ", optimizer "
          << bytes_text(static_cast<std::size_t>(b[2])) << ", activations "
          << bytes_text(static_cast<std::size_t>(b[3]))
          << (b[4] > 0 ? ", gathered units at most " + bytes_text(static_cast<std::size_t>(b[4]))
                       : std::string())
          << "\n";
    }
    for (const auto& [axes, bytes] : per_axes) {
      if (steps_run == 0) break;
      out << "rank 0 sent along " << axes << ": "
          << bytes_text(static_cast<std::size_t>(bytes / steps_run)) << " per step\n";
    }
    if (layout.pipeline && steps_run > 0) {
      const nlohmann::json p = pipeline_summary(*layout.pipeline, all, kFields);
      out << "pipeline, last step: bubble " << std::setprecision(3)
          << p["bubble_fraction"].get<double>() << " measured, "
          << p["published_bubble_fraction"].get<double>() << " published\n";
    }
  }

  // The pipeline's last step from every rank's fields (`fields` each: stage at 5, busy and
  // elapsed nanoseconds at 6 and 7, peak activation bytes at 3): the measured bubble (idle over
  // busy time, averaged over ranks, as the published (p - 1) / m counts it) and each stage's
  // peak activation bytes.
  static nlohmann::json pipeline_summary(const models::GptPipeline& pipeline,
                                         const std::vector<std::int64_t>& all, std::size_t fields) {
    const std::size_t ranks = all.size() / fields;
    double bubble = 0;
    std::map<std::int64_t, std::int64_t> peak_by_stage;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::int64_t* b = all.data() + fields * r;
      const auto busy = static_cast<double>(b[6]);
      bubble += busy > 0 ? (static_cast<double>(b[7]) - busy) / busy : 0;
      peak_by_stage[b[5]] = std::max(peak_by_stage[b[5]], b[3]);
    }
    nlohmann::json peaks = nlohmann::json::array();
    for (const auto& [stage, bytes] : peak_by_stage) peaks.push_back(bytes);
    const PipelineSchedule schedule =
        build_schedule(pipeline.schedule, static_cast<std::int64_t>(peak_by_stage.size()),
                       pipeline.microbatches, pipeline.virtual_stages);
    return {{"schedule", to_string(pipeline.schedule)},
            {"microbatches", pipeline.microbatches},
            {"virtual_stages", pipeline.virtual_stages},
            {"layers", pipeline.layers},
            {"bubble_fraction", bubble / static_cast<double>(ranks)},
            {"published_bubble_fraction", schedule.bubble_fraction()},
            {"peak_activation_bytes_per_stage", peaks}};
  }

  CLI::App* app_;
  std::string model_;
  std::optional<std::string> mesh_;
  std::string zero_;
  std::string steps_;
  std::string batch_;
  std::optional<std::string> seq_;
  std::string lr_;
  std::optional<std::string> warmup_;
  std::string seed_;
  std::optional<std::string> data_;
  std::string data_format_;
  std::optional<std::string> val_data_;
  std::string eval_every_;
  std::optional<std::string> threads_;
  std::string backend_;
  std::optional<std::string> log_dir_;
  std::string recompute_ = "none";
  std::string blas_ = "onednn";
  train::CheckpointPolicy checkpoint_flags_;
  std::string save_every_ = "0";
  std::string keep_ = "0";
  PipelineFlags pipeline_flags_;
  std::optional<std::string> timeline_;
  bool json_ = false;
  bool no_overlap_ = false;
  bool sequence_parallel_ = false;
  std::string param_sharding_;
};

}  // namespace

std::unique_ptr<Command> add_train_command(CLI::App& parent) {
  return std::make_unique<TrainCommand>(parent);
}

}  // namespace shardwise::cli

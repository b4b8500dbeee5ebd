// `shardwise train`: the flags parsed into a training job (train/training_job.hpp), which runs
// the whole recipe; this prints what the job reports, for a person or as one JSON object per
// line.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>
#include <type_traits>

#include "backend_flag.hpp"
#include "blas_flag.hpp"
#include "command.hpp"
#include "notes.hpp"
#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/models/hf_weights.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/models/model_resolution.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/train/run_config.hpp"
#include "shardwise/train/training_job.hpp"
#include "text_table.hpp"

namespace shardwise::cli {
namespace {

// --mesh as text; the job checks its axes.
Mesh train_mesh(const std::optional<std::string>& text) {
  if (!text) return Mesh({"data"}, {1});
  try {
    return Mesh::parse(*text);
  } catch (const Error& e) {  // a ParseError or an InvalidArgument
    throw InvalidArgument(std::string("--mesh: ") + e.what());
  }
}

// --param-sharding's rules file, read once; nullopt for first-dim and logical-axes.
std::optional<ShardingRules> read_param_sharding_rules(const std::string& source,
                                                       const Mesh& mesh) {
  if (source == "first-dim" || source == "logical-axes") return std::nullopt;
  struct stat info {};
  if (::stat(source.c_str(), &info) != 0) {
    throw InvalidArgument("--param-sharding: '" + source +
                          "' is neither first-dim, logical-axes nor a readable rules file");
  }
  const std::string text = read_file(source, "--param-sharding");
  try {
    return load_sharding_rules(text, ParallelismConfig::from_mesh(mesh));
  } catch (const Error& e) {
    throw InvalidArgument("--param-sharding '" + source + "': " + e.what());
  }
}

train::PipelineRequest pipeline_request(const std::string& schedule,
                                        const std::optional<std::string>& microbatches,
                                        const std::optional<std::string>& virtual_stages,
                                        const std::string& stages_by) {
  train::PipelineRequest request;
  if (schedule == "gpipe") {
    request.schedule = ScheduleKind::kGPipe;
  } else if (schedule == "1f1b") {
    request.schedule = ScheduleKind::kOneFOneB;
  } else if (schedule == "interleaved") {
    request.schedule = ScheduleKind::kInterleaved1F1B;
  } else {
    throw InvalidArgument("--schedule is '" + echo_input(schedule) +
                          "'; expected gpipe, 1f1b or interleaved");
  }
  if (microbatches) {
    request.microbatches = bounded(*microbatches, "--microbatches", 1, kMaxMicrobatches);
  }
  if (virtual_stages) {
    request.virtual_stages = bounded(*virtual_stages, "--virtual-stages", 1, kMaxVirtualStages);
  }
  if (stages_by == "count") {
    request.stages_by = train::StagesBy::kCount;
  } else if (stages_by == "cost") {
    request.stages_by = train::StagesBy::kCost;
  } else {
    throw InvalidArgument("--stages-by is '" + echo_input(stages_by) + "'; expected count or cost");
  }
  return request;
}

// Prints what the job reports: lines for a person, or one JSON object per line.
class TrainPrinter final : public train::JobObserver {
 public:
  // A person's lines every `every` steps (the first, the last and those with a validation loss
  // always); JSON lines every step.
  TrainPrinter(std::ostream& out, bool json, std::int64_t every)
      : out_(out), json_(json), every_(every) {}

  void started(const train::JobPlan& plan) override {
    if (!json_) say(train::plan_text(plan));
  }
  void note(const std::string& text) override {
    if (!json_) say(text + "\n");
  }
  void logging(const std::string& folder) override {
    if (!json_) {
      say("logs: " + echo_input(folder, 200) + " (tensorboard --logdir " + echo_input(folder, 200) +
          ")\n");
    }
  }
  void step(const train::StepReport& r) override {
    std::ostringstream line;
    if (json_) {
      nlohmann::json json{{"step", r.step},
                          {"loss", r.loss},
                          {"grad_norm", r.grad_norm},
                          {"tokens_per_s", r.tokens_per_s}};
      if (r.val_loss) json["val_loss"] = *r.val_loss;
      line << json.dump() << '\n';
    } else {
      if (r.step != r.first_step && r.step != r.steps && !r.val_loss && r.step % every_ != 0) {
        return;
      }
      const double eta = r.elapsed_seconds / static_cast<double>(r.step - r.first_step + 1) *
                         static_cast<double>(r.steps - r.step);
      line << "step " << std::setw(6) << r.step << "/" << r.steps << "  loss " << std::fixed
           << std::setprecision(4) << r.loss << (r.val_loss ? "  val " : "")
           << (r.val_loss ? std::to_string(*r.val_loss).substr(0, 6) : "") << "  "
           << std::setprecision(0) << r.tokens_per_s << " tok/s  eta " << eta << " s\n";
    }
    say(line.str());
  }
  void finished(const train::JobSummary& summary) override {
    say(json_ ? summary_json(summary) : summary_text(summary));
  }

 private:
  void say(const std::string& text) {
    const std::lock_guard lock(mutex_);
    out_ << text;
    out_.flush();
  }

  static nlohmann::json pipeline_json(const train::PipelineReport& p) {
    return {{"schedule", to_string(p.layout.schedule)},
            {"microbatches", p.layout.microbatches},
            {"virtual_stages", p.layout.virtual_stages},
            {"layers", p.layout.layers},
            {"bubble_fraction", p.bubble_fraction},
            {"published_bubble_fraction", p.published_bubble_fraction},
            {"peak_activation_bytes_per_stage", p.peak_activation_bytes_per_stage}};
  }

  static std::string summary_json(const train::JobSummary& s) {
    nlohmann::json ranks = nlohmann::json::array();
    for (std::size_t r = 0; r < s.ranks.size(); ++r) {
      const train::RankReport& b = s.ranks[r];
      ranks.push_back({{"rank", r},
                       {"params_bytes", b.params_bytes},
                       {"grads_bytes", b.grads_bytes},
                       {"optimizer_bytes", b.optimizer_bytes},
                       {"activations_peak_bytes", b.activation_bytes},
                       {"gathered_peak_bytes", b.gathered_peak_bytes},
                       {"compute_copies_peak_bytes", b.compute_copies_peak_bytes}});
      if (s.pipelined) ranks.back()["stage"] = b.stage;
      if (b.routed_rows > 0) {
        ranks.back()["routed_rows"] = b.routed_rows;
        ranks.back()["expert_rows"] = b.expert_rows;
      }
    }
    nlohmann::json summary{
        {"parameters", s.parameters},
        {"steps_run", s.steps_run},
        {"final_loss", s.steps_run > 0 ? nlohmann::json(s.final_loss) : nullptr},
        {"tokens_per_s", s.steps_run > 0 ? nlohmann::json(s.tokens_per_s) : nullptr},
        {"blas", s.blas},
        {"ranks", ranks},
        {"comm_bytes_per_step", s.comm_bytes_per_step}};
    if (s.pipeline) summary["pipeline"] = pipeline_json(*s.pipeline);
    if (s.expert_imbalance > 0) {
      summary["expert_imbalance"] = s.expert_imbalance;
      summary["dropped_fraction"] = s.dropped_fraction;
    }
    return nlohmann::json{{"summary", summary}}.dump() + "\n";
  }

  static std::string summary_text(const train::JobSummary& s) {
    std::ostringstream out;
    if (s.steps_run == 0) {
      out << "done: no steps left: the checkpoint is of step " << s.first_step - 1
          << ", and --steps is " << s.steps << "\n";
    } else {
      out << "done: final loss " << std::fixed << std::setprecision(4) << s.final_loss << ", "
          << std::setprecision(0) << s.tokens_per_s << " tok/s\n";
    }
    for (std::size_t r = 0; r < s.ranks.size(); ++r) {
      const train::RankReport& b = s.ranks[r];
      const auto bytes = [](std::int64_t n) { return bytes_text(static_cast<std::uint64_t>(n)); };
      out << "rank " << r << ": params " << bytes(b.params_bytes) << ", grads "
          << bytes(b.grads_bytes) << ", optimizer " << bytes(b.optimizer_bytes) << ", activations "
          << bytes(b.activation_bytes)
          << (b.gathered_peak_bytes > 0 ? ", gathered units at most " + bytes(b.gathered_peak_bytes)
                                        : std::string())
          << (b.compute_copies_peak_bytes > 0
                  ? ", bf16 weight copies at most " + bytes(b.compute_copies_peak_bytes)
                  : std::string())
          << "\n";
    }
    if (s.expert_imbalance > 0) {
      out << "experts: the busiest rank's computed " << std::setprecision(3) << s.expert_imbalance
          << "x the rows a rank routes (1: balanced)";
      if (s.dropped_fraction > 0) {
        out << "; " << std::setprecision(4) << 100 * s.dropped_fraction
            << "% of the routed rows dropped over their experts' capacity";
      }
      out << "\n";
    }
    for (const auto& [axes, bytes] : s.comm_bytes_per_step) {
      out << "rank 0 sent along " << axes << ": " << bytes_text(static_cast<std::uint64_t>(bytes))
          << " per step\n";
    }
    if (s.pipeline) {
      out << "pipeline, last step: bubble " << std::setprecision(3) << s.pipeline->bubble_fraction
          << " measured, " << s.pipeline->published_bubble_fraction << " published\n";
    }
    return out.str();
  }

  std::ostream& out_;
  bool json_;
  std::int64_t every_;
  std::mutex mutex_;
};

// Each setting of a training job and the flag that gives it: how the job's messages name the
// setting here (JobSettings::names), and the flag a --config file's setting fills.
const std::map<std::string, std::string, std::less<>>& setting_flags() {
  static const std::map<std::string, std::string, std::less<>> flags{
      {"model", "--model"},
      {"mesh", "--mesh"},
      {"zero", "--zero"},
      {"steps", "--steps"},
      {"batch", "--batch"},
      {"seq", "--seq"},
      {"learning_rate", "--lr"},
      {"warmup", "--warmup"},
      {"seed", "--seed"},
      {"eval_every", "--eval-every"},
      {"recompute", "--recompute"},
      {"precision", "--precision"},
      {"reduce_dtype", "--reduce-dtype"},
      {"residual_dtype", "--residual-dtype"},
      {"capacity_factor", "--capacity-factor"},
      {"expert_bias_rate", "--expert-bias-rate"},
      {"param_sharding", "--param-sharding"},
      {"threads", "--threads"},
      {"data", "--data"},
      {"data_format", "--data-format"},
      {"val_data", "--val-data"},
      {"tokenizer", "--tokenizer"},
      {"schedule", "--schedule"},
      {"microbatches", "--microbatches"},
      {"virtual_stages", "--virtual-stages"},
      {"stages_by", "--stages-by"},
      {"save", "--save"},
      {"save_every", "--save-every"},
      {"keep", "--keep"},
      {"resume", "--resume"},
      {"init_from", "--init-from"},
      {"sequence_parallel", "--sequence-parallel"},
      {"overlap", "--no-overlap"},
      {"save_async", "--save-async"},
      {"log_dir", "--log-dir"},
      {"timeline", "--timeline"},
      {"backend", "--backend"},
      {"blas", "--blas"}};
  return flags;
}

const char* flag_of(std::string_view setting) {
  return setting_flags().find(setting)->second.c_str();
}

// The flags as given; a --config file fills those not given (TrainCommand::run).
struct TrainFlags {
  std::optional<std::string> config;
  std::string model;
  std::optional<std::string> mesh;
  std::string zero;
  std::string steps;
  std::string batch;
  std::optional<std::string> seq;
  std::string lr;
  std::optional<std::string> warmup;
  std::string seed;
  std::optional<std::string> data;
  std::string data_format;
  std::optional<std::string> val_data;
  std::optional<std::string> tokenizer;
  std::string eval_every;
  std::string print_every;
  std::optional<std::string> threads;
  std::optional<std::string> backend;
  std::optional<std::string> log_dir;
  std::string recompute = "none";
  std::string precision = "fp32";
  std::string reduce_dtype = "fp32";
  std::string residual_dtype = "fp32";
  std::string capacity_factor = "0";
  std::string expert_bias_rate = "0";
  std::string blas = "onednn";
  train::CheckpointPolicy checkpoint_flags;
  std::optional<std::string> init_from;
  std::string save_every = "0";
  std::string keep = "0";
  std::string schedule;
  std::optional<std::string> microbatches;
  std::optional<std::string> virtual_stages;
  std::string stages_by;
  std::optional<std::string> timeline;
  bool json = false;
  bool no_overlap = false;
  bool sequence_parallel = false;
  std::string param_sharding;
};

class TrainCommand final : public Command {
 public:
  explicit TrainCommand(CLI::App& parent)
      : app_(parent.add_subcommand(
            "train",
            "Train a model (a preset, a model file or a Hugging Face folder) on text or token "
            "files, on one rank or any "
            "mesh of data, fsdp, model and pipeline axes, matching the "
            "one-rank run step for step")) {
    app_->add_option("--model", flags_.model,
                     "A preset (" + models::preset_names() +
                         "), a model file, or a Hugging Face model folder or its config.json")
        ->default_val("tiny");
    app_->add_option("--mesh", flags_.mesh,
                     "The mesh of data, fsdp, model and pipeline axes, e.g. data=2,fsdp=2 (one "
                     "rank without)");
    app_->add_option(
            "--zero", flags_.zero,
            "ZeRO stage: 0 (plain data parallel), 1 (optimizer state sharded), 2 (+ gradients "
            "reduce-scattered after backward) or 3 (+ parameters, gathered per layer)")
        ->default_val("0");
    app_->add_option("--steps", flags_.steps, "Training steps")->default_val("100");
    app_->add_option("--batch", flags_.batch, "Global sequences per step")->default_val("8");
    app_->add_option("--seq", flags_.seq, "Tokens per sequence (default: the model's context)");
    app_->add_option("--lr", flags_.lr, "Peak learning rate")->default_val("1e-3");
    app_->add_option("--warmup", flags_.warmup, "Warm-up steps (default: 10, at most --steps)");
    app_->add_option("--seed", flags_.seed, "Seed of the initialisation and of the batches")
        ->default_val("1337");
    app_->add_option("--data", flags_.data,
                     "Training data: a text file of any size (encoded by --tokenizer; bytes for "
                     "a 256-token model), a token file (--data-format), or fine-tuning examples "
                     "in JSON Lines (text, prompt/completion or chat messages; *.jsonl); "
                     "default: a built-in corpus");
    app_->add_option("--data-format", flags_.data_format,
                     "text, tokens-u16 or tokens-u32 (nanoGPT's train.bin: little-endian ids, "
                     "checked against the vocabulary) or jsonl (default: jsonl for *.jsonl, "
                     "else text)")
        ->default_val("text");
    app_->add_option("--val-data", flags_.val_data,
                     "Held-out data in the same format (default: the last tenth of --data)");
    app_->add_option("--tokenizer", flags_.tokenizer,
                     "The tokenizer.json that encodes text --data and --val-data (default: the "
                     "--init-from folder's; text is bytes only for a model of 256 tokens)");
    app_->add_option("--print-every", flags_.print_every,
                     "A progress line every K steps (the first, the last and validation steps "
                     "always; --json prints every step)")
        ->default_val("1");
    app_->add_option("--eval-every", flags_.eval_every, "Validation loss every K steps (0: never)")
        ->default_val("0");
    app_->add_option("--threads", flags_.threads,
                     "BLAS threads per rank (default 1 with several ranks)");
    add_blas_option(*app_, flags_.blas);
    app_->add_option("--backend", flags_.backend, "local or mpi (default: mpi under mpirun)");
    app_->add_option("--param-sharding", flags_.param_sharding,
                     "How ZeRO splits each parameter: first-dim (FSDP's dimension 0, as FSDP2), "
                     "logical-axes (FSDP's rules on the model's logical axes) or a rules file "
                     "(as `shardwise specs --rules` reads)")
        ->default_val("first-dim");
    app_->add_flag("--sequence-parallel", flags_.sequence_parallel,
                   "Split LayerNorm and residual activations along the sequence over the model "
                   "axis (Korthikanti et al.): all-gathers and reduce-scatters replace its "
                   "all-reduces");
    app_->add_option("--recompute", flags_.recompute,
                     "What a layer keeps for backward: none, selective (the same: attention "
                     "never keeps its seq x seq weights) or full (each layer's input only; the "
                     "layer runs again in backward)")
        ->default_val("none");
    app_->add_option("--precision", flags_.precision,
                     "What the model computes in: fp32, or bf16 (mixed precision: float32 "
                     "master weights, gradients and AdamW moments; the matrix products on bf16 "
                     "copies of the weights and bf16 inputs, accumulating in float32)")
        ->default_val("fp32");
    app_->add_option("--reduce-dtype", flags_.reduce_dtype,
                     "What the data-parallel ranks reduce gradients in: fp32, or bf16 (half the "
                     "bytes, as Megatron-LM's --grad-reduce-in-bf16)")
        ->default_val("fp32");
    app_->add_option("--residual-dtype", flags_.residual_dtype,
                     "What the residual stream is kept in under --precision bf16: fp32 (as "
                     "PyTorch's autocast), or bf16 (each residual add rounded, as Megatron-LM's "
                     "--bf16 without --fp32-residual-connection: less activation memory)")
        ->default_val("fp32");
    app_->add_option("--capacity-factor", flags_.capacity_factor,
                     "A Mixture of Experts' expert capacity: each expert takes at most "
                     "ceil(F x seq x k / experts) of each sequence's choices, in token order, and "
                     "the rest are dropped (Megatron-LM's --moe-expert-capacity-factor, per "
                     "sequence); 0, the default, is dropless")
        ->default_val("0");
    app_->add_option("--expert-bias-rate", flags_.expert_bias_rate,
                     "A Mixture of Experts' auxiliary-loss-free load balancing (torchtitan's "
                     "load_balance_coeff, DeepSeek-V3's bias update speed): each layer keeps a "
                     "bias per expert, added to the probabilities for the choice only, moved "
                     "after each step by R toward the experts chosen less than the mean; 0, the "
                     "default, keeps none")
        ->default_val("0");
    app_->add_flag("--no-overlap", flags_.no_overlap,
                   "Reduce gradients only after backward and gather no ZeRO-3 unit ahead (to "
                   "measure what overlap hides)");
    app_->add_option("--schedule", flags_.schedule,
                     "Pipeline schedule over the mesh's pipeline axis: gpipe, 1f1b or "
                     "interleaved")
        ->default_val("1f1b");
    app_->add_option("--microbatches", flags_.microbatches,
                     "Micro-batches per step on each data-parallel rank (default: the fewest, at "
                     "least one per stage, that divide the rank's sequences)");
    app_->add_option("--virtual-stages", flags_.virtual_stages,
                     "Model chunks per pipeline rank (interleaved; default 2)");
    app_->add_option("--stages-by", flags_.stages_by,
                     "How layers go to stages: count (equal counts, the first stages taking the "
                     "remainder) or cost (the slowest stage as fast as possible, the head's "
                     "FLOPs counted on the last)")
        ->default_val("count");
    app_->add_option("--timeline", flags_.timeline,
                     "Write the last step's executed pipeline timeline (every rank's passes with "
                     "their start and end) as JSON; `shardwise schedule --from FILE` draws it");
    app_->add_flag("--json", flags_.json, "One JSON object per line");
    app_->add_option("--log-dir", flags_.log_dir,
                     "Keep the run's logs in this folder (rank 0 writes): TensorBoard event files "
                     "(tensorboard --logdir DIR), metrics.jsonl with the same numbers, and "
                     "config.json, every setting resolved");
    app_->add_option("--save", flags_.checkpoint_flags.save,
                     "Save the training state into this folder, one sharded checkpoint per save "
                     "(PATH/step-00000100), written by every rank at once");
    app_->add_option("--save-every", flags_.save_every,
                     "Save every N steps (default: at the last step only)")
        ->default_val("0");
    app_->add_option("--keep", flags_.keep,
                     "Keep this run's newest K checkpoints in --save (default: every one)")
        ->default_val("0");
    app_->add_flag("--save-async", flags_.checkpoint_flags.save_async,
                   "Copy the state to memory and write it while training goes on");
    app_->add_option("--resume", flags_.checkpoint_flags.resume,
                     "Continue from a checkpoint (or the newest in a --save folder), saved on "
                     "any layout; on the same layout the run continues bit for bit");
    app_->add_option("--init-from", flags_.init_from,
                     "Start from a Hugging Face model folder's weights (fine-tuning; its "
                     "config.json is the model unless --model names the same one)");
    app_->add_option("--config", flags_.config,
                     "Replay a run: the config.json a run's --log-dir holds gives every setting "
                     "(model, mesh, batch, data, schedule, checkpoints, the optimizer's); flags "
                     "given beside it override it, and say so");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }
  // Progress is printed as the run goes.
  [[nodiscard]] bool streams() const override { return true; }

  void run(std::ostream& out) const override {
    TrainFlags f = flags_;
    const Replay replay = take_config(f);
    const ScopedBlas blas(f.blas);
    std::vector<std::string> notes;
    // Every setting checked before a rank starts; a refused one that --config gave is named as
    // its file's.
    const auto prepare = [&]() {
      train::JobSettings job;
      if (f.init_from && f.init_from->empty())
        throw InvalidArgument("--init-from is an empty path");
      // --init-from's folder is the model where --model is not given.
      const bool folder_model = f.init_from && app_->get_option("--model")->count() == 0;
      job.model_given = folder_model ? *f.init_from : f.model;
      job.model = models::model_definition(job.model_given,
                                           folder_model ? "--init-from" : "--model", &notes);
      // JSON Lines are read as examples where the format is not named: a .jsonl file is never a
      // text to train on as it stands.
      const bool format_given = app_->get_option("--data-format")->count() > 0;
      job.data.format = train::parse_token_format(
          !format_given && f.data && f.data->ends_with(".jsonl") ? "jsonl" : f.data_format,
          "--data-format");
      if (!f.data && (f.val_data || format_given)) {
        throw InvalidArgument(std::string(f.val_data ? "--val-data" : "--data-format") +
                              " describes --data, which is not given (the built-in corpus is "
                              "text)");
      }
      job.data.path = f.data;
      job.data.validation_path = f.val_data;
      job.data.tokenizer = f.tokenizer;
      // Text for a Hugging Face model is encoded by its own tokenizer unless one is given.
      if (!f.tokenizer && f.init_from && f.data &&
          (job.data.format == train::TokenFormat::kText ||
           job.data.format == train::TokenFormat::kJsonLines)) {
        const std::filesystem::path own = std::filesystem::path(*f.init_from) / "tokenizer.json";
        std::error_code error;
        if (std::filesystem::is_regular_file(own, error)) job.data.tokenizer = own.string();
      }
      job.mesh = train_mesh(f.mesh);
      const int ranks = static_cast<int>(job.mesh.size());
      train::TrainSettings& t = job.training;
      t.steps = bounded(f.steps, "--steps", 1, 10'000'000);
      t.batch = static_cast<std::size_t>(bounded(f.batch, "--batch", 1, 65536));
      const auto context = static_cast<std::int64_t>(job.model->context_length());
      t.seq = static_cast<std::size_t>(f.seq ? bounded(*f.seq, "--seq", 1, context) : context);
      t.learning_rate = static_cast<float>(finite_number(f.lr, "--lr"));
      if (!(t.learning_rate > 0 && t.learning_rate <= 1)) {
        throw InvalidArgument("--lr is " + f.lr + "; expected more than 0 and at most 1");
      }
      t.warmup = f.warmup ? bounded(*f.warmup, "--warmup", 0, t.steps)
                          : std::min<std::int64_t>(10, t.steps);
      t.seed = static_cast<std::uint64_t>(bounded(f.seed, "--seed", 0, INT64_MAX));
      t.zero = static_cast<int>(bounded(f.zero, "--zero", 0, 3));
      t.overlap = !f.no_overlap;
      if (replay.config) train::apply_optimizer_settings(*replay.config, t);
      job.eval_every = bounded(f.eval_every, "--eval-every", 0, t.steps);
      job.checkpoints = f.checkpoint_flags;
      job.checkpoints.save_every = integer(f.save_every, "--save-every");
      job.checkpoints.keep = integer(f.keep, "--keep");
      if (job.checkpoints.resume && job.checkpoints.resume->empty()) {
        throw InvalidArgument("--resume is an empty path");
      }
      if (f.init_from) {
        // The folder's own model, or one that is the same (a preset or file of its sizes).
        const auto held =
            models::model_definition(*f.init_from, "--init-from", folder_model ? nullptr : &notes);
        if (held->family() != job.model->family() ||
            held->config_json() != job.model->config_json()) {
          throw InvalidArgument("--init-from '" + echo_input(*f.init_from, 200) + "' holds " +
                                held->describe() + "; --model is " + job.model->describe());
        }
        job.checkpoints.init_from = models::hf_initial_values(*f.init_from, job.model);
        job.checkpoints.init_from_words = "--init-from '" + echo_input(*f.init_from, 200) + "'";
        job.checkpoints.init_from_path = f.init_from;
      }
      job.recompute = parse_recompute(f.recompute, "--recompute");
      job.precision = parse_precision(f.precision, "--precision");
      job.training.reduce_dtype = parse_float_dtype(f.reduce_dtype, "--reduce-dtype");
      job.residual_dtype = parse_float_dtype(f.residual_dtype, "--residual-dtype");
      job.capacity_factor = finite_number(f.capacity_factor, "--capacity-factor");
      job.expert_bias_rate = finite_number(f.expert_bias_rate, "--expert-bias-rate");
      job.sequence_parallel = f.sequence_parallel;
      job.threads = f.threads ? static_cast<int>(bounded(*f.threads, "--threads", 1, 256))
                              : (ranks > 1 ? 1 : 0);
      for (const char* flag : {"--schedule", "--microbatches", "--virtual-stages", "--stages-by"}) {
        if (app_->get_option(flag)->count() > 0 || replay.took(flag)) {
          job.pipeline =
              pipeline_request(f.schedule, f.microbatches, f.virtual_stages, f.stages_by);
          break;
        }
      }
      const bool pipelined = job.mesh.has_axis("pipeline") && job.mesh.axis_size("pipeline") > 1;
      if (!job.pipeline && pipelined) {
        job.pipeline = pipeline_request(f.schedule, f.microbatches, f.virtual_stages, f.stages_by);
      }
      job.param_sharding = f.param_sharding;
      job.sharding_rules = read_param_sharding_rules(f.param_sharding, job.mesh);
      job.log_dir = f.log_dir;
      job.timeline = f.timeline;
      job.caller_settings = {{"--json", f.json ? "on" : "off"}};
      job.names = train::SettingNames(setting_flags());
      return std::make_unique<const train::TrainingJob>(std::move(job));
    };
    std::unique_ptr<const train::TrainingJob> prepared;
    try {
      prepared = prepare();
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(replay.explain(e.what()));
    }
    const train::TrainingJob& training = *prepared;
    notes.insert(notes.begin(), replay.notes.begin(), replay.notes.end());
    show_notes("train", notes);
    const BackendInfo& backend = backend_from(f.backend);
    training.check_memory(backend);
    TrainPrinter printer(out, f.json, bounded(f.print_every, "--print-every", 1, INT64_MAX));
    training.run(backend, printer);
  }

 private:
  // A --config file's run: the settings of it the flags took, and a note for each flag given
  // beside it that overrode one.
  struct Replay {
    std::optional<train::RunConfig> config;
    std::vector<std::string> notes;
    std::string source;              // "--config 'run.json'"
    std::vector<std::string> taken;  // the flags it filled
    [[nodiscard]] bool took(const std::string& flag) const {
      return std::find(taken.begin(), taken.end(), flag) != taken.end();
    }
    // A refusal of a flag this run took from the file, said to be the file's.
    [[nodiscard]] std::string explain(const std::string& message) const {
      for (const std::string& flag : taken) {
        if (message.starts_with(flag + " ") || message.starts_with(flag + ":")) {
          return message + " (" + flag + " as " + source + " gives it; give " + flag +
                 " to replace it)";
        }
      }
      return message;
    }
  };
  // Fills the flags not given from --config's file.
  [[nodiscard]] Replay take_config(TrainFlags& f) const;

  CLI::App* app_;
  TrainFlags flags_;
};

TrainCommand::Replay TrainCommand::take_config(TrainFlags& f) const {
  Replay replay;
  if (!f.config) return replay;
  const std::string what = "--config '" + echo_input(*f.config, 200) + "'";
  replay.source = what;
  replay.config = train::read_run_config(read_file(*f.config, "--config"), what);
  const std::map<std::string, std::string>& settings = replay.config->settings;
  // A setting to its flag: taken where the flag is not given; where it is, the flag wins and a
  // note says what it replaced.
  const auto take = [&](const std::string& setting, auto& into) {
    const char* const flag = flag_of(setting);
    const auto found = settings.find(setting);
    if (found == settings.end()) return;
    if (app_->get_option(flag)->count() == 0) {
      into = found->second;
      replay.taken.emplace_back(flag);
      return;
    }
    const std::string given = [&]() -> std::string {
      if constexpr (std::is_same_v<std::decay_t<decltype(into)>, bool>) {
        return into ? "true" : "false";
      } else if constexpr (std::is_same_v<std::decay_t<decltype(into)>, std::string>) {
        return into;
      } else {
        return into.value_or("");
      }
    }();
    if (given != found->second) {
      replay.notes.push_back(std::string(flag) + " " + echo_input(given, 80) + " replaces " +
                             setting + " " + echo_input(found->second, 80) + " of " + what);
    }
  };
  const auto take_switch = [&](const std::string& setting, std::string_view job_setting,
                               bool& into) {
    const char* const flag = flag_of(job_setting);
    const bool set = settings.count(setting) != 0;
    if (app_->get_option(flag)->count() == 0) {
      into = set;
    } else if (!set) {
      replay.notes.push_back(std::string(flag) + " is given; the run of " + what + " had it off");
    }
  };
  take("model", f.model);
  take("mesh", f.mesh);
  take("zero", f.zero);
  take("steps", f.steps);
  take("batch", f.batch);
  take("seq", f.seq);
  take("learning_rate", f.lr);
  take("warmup", f.warmup);
  take("seed", f.seed);
  take("eval_every", f.eval_every);
  take("recompute", f.recompute);
  take("precision", f.precision);
  take("reduce_dtype", f.reduce_dtype);
  take("residual_dtype", f.residual_dtype);
  take("capacity_factor", f.capacity_factor);
  take("expert_bias_rate", f.expert_bias_rate);
  take("param_sharding", f.param_sharding);
  take("threads", f.threads);
  take("data", f.data);
  take("data_format", f.data_format);
  take("val_data", f.val_data);
  take("tokenizer", f.tokenizer);
  take("schedule", f.schedule);
  take("microbatches", f.microbatches);
  take("virtual_stages", f.virtual_stages);
  take("stages_by", f.stages_by);
  take("save", f.checkpoint_flags.save);
  take("save_every", f.save_every);
  take("keep", f.keep);
  take("resume", f.checkpoint_flags.resume);
  take("init_from", f.init_from);
  take_switch("sequence_parallel", "sequence_parallel", f.sequence_parallel);
  take_switch("no_overlap", "overlap", f.no_overlap);
  take_switch("save_async", "save_async", f.checkpoint_flags.save_async);
  return replay;
}

}  // namespace

std::unique_ptr<Command> add_train_command(CLI::App& parent) {
  return std::make_unique<TrainCommand>(parent);
}

}  // namespace shardwise::cli

// `shardwise train`: the flags parsed into a training job (train/training_job.hpp), which runs
// the whole recipe; this prints what the job reports, for a person or as one JSON object per
// line.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iomanip>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "backend_flag.hpp"
#include "blas_flag.hpp"
#include "command.hpp"
#include "model_argument.hpp"
#include "notes.hpp"
#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/models/hf_weights.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
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
      nlohmann::json json{{"step", r.step}, {"loss", r.loss}, {"tokens_per_s", r.tokens_per_s}};
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
                       {"gathered_peak_bytes", b.gathered_peak_bytes}});
      if (s.pipelined) ranks.back()["stage"] = b.stage;
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
          << "\n";
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

class TrainCommand final : public Command {
 public:
  explicit TrainCommand(CLI::App& parent)
      : app_(parent.add_subcommand(
            "train",
            "Train a model (a preset, a model file or a Hugging Face folder) on text or token "
            "files, on one rank or any "
            "mesh of data, fsdp, model and pipeline axes, matching the "
            "one-rank run step for step")) {
    app_->add_option("--model", model_,
                     "A preset (" + models::preset_names() +
                         "), a model file, or a Hugging Face model folder or its config.json")
        ->default_val("tiny");
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
                     "Training data: a text file of any size (encoded by --tokenizer; bytes for "
                     "a 256-token model), a token file (--data-format), or fine-tuning examples "
                     "in JSON Lines (text, prompt/completion or chat messages; *.jsonl); "
                     "default: a built-in corpus");
    app_->add_option("--data-format", data_format_,
                     "text, tokens-u16 or tokens-u32 (nanoGPT's train.bin: little-endian ids, "
                     "checked against the vocabulary) or jsonl (default: jsonl for *.jsonl, "
                     "else text)")
        ->default_val("text");
    app_->add_option("--val-data", val_data_,
                     "Held-out data in the same format (default: the last tenth of --data)");
    app_->add_option("--tokenizer", tokenizer_,
                     "The tokenizer.json that encodes text --data and --val-data (default: the "
                     "--init-from folder's; text is bytes only for a model of 256 tokens)");
    app_->add_option("--print-every", print_every_,
                     "A progress line every K steps (the first, the last and validation steps "
                     "always; --json prints every step)")
        ->default_val("1");
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
    app_->add_option("--schedule", schedule_,
                     "Pipeline schedule over the mesh's pipeline axis: gpipe, 1f1b or "
                     "interleaved")
        ->default_val("1f1b");
    app_->add_option("--microbatches", microbatches_,
                     "Micro-batches per step on each data-parallel rank (default: the fewest, at "
                     "least one per stage, that divide the rank's sequences)");
    app_->add_option("--virtual-stages", virtual_stages_,
                     "Model chunks per pipeline rank (interleaved; default 2)");
    app_->add_option("--stages-by", stages_by_,
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
    app_->add_option("--init-from", init_from_,
                     "Start from a Hugging Face model folder's weights (fine-tuning; its "
                     "config.json is the model unless --model names the same one)");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }
  // Progress is printed as the run goes.
  [[nodiscard]] bool streams() const override { return true; }

  void run(std::ostream& out) const override {
    train::JobSettings job;
    if (init_from_ && init_from_->empty()) throw InvalidArgument("--init-from is an empty path");
    // --init-from's folder is the model where --model is not given.
    const bool folder_model = init_from_ && app_->get_option("--model")->count() == 0;
    job.model_given = folder_model ? *init_from_ : model_;
    std::vector<std::string> notes;
    job.model = model_definition(job.model_given, folder_model ? "--init-from" : "--model", &notes);
    // JSON Lines are read as examples where the format is not named: a .jsonl file is never a
    // text to train on as it stands.
    const bool format_given = app_->get_option("--data-format")->count() > 0;
    job.data.format = train::parse_token_format(
        !format_given && data_ && data_->ends_with(".jsonl") ? "jsonl" : data_format_,
        "--data-format");
    if (!data_ && (val_data_ || format_given)) {
      throw InvalidArgument(std::string(val_data_ ? "--val-data" : "--data-format") +
                            " describes --data, which is not given (the built-in corpus is "
                            "text)");
    }
    job.data.path = data_;
    job.data.validation_path = val_data_;
    job.data.tokenizer = tokenizer_;
    // Text for a Hugging Face model is encoded by its own tokenizer unless one is given.
    if (!tokenizer_ && init_from_ && data_ &&
        (job.data.format == train::TokenFormat::kText ||
         job.data.format == train::TokenFormat::kJsonLines)) {
      const std::filesystem::path own = std::filesystem::path(*init_from_) / "tokenizer.json";
      std::error_code error;
      if (std::filesystem::is_regular_file(own, error)) job.data.tokenizer = own.string();
    }
    job.mesh = train_mesh(mesh_);
    const int ranks = static_cast<int>(job.mesh.size());
    train::TrainSettings& t = job.training;
    t.steps = bounded(steps_, "--steps", 1, 10'000'000);
    t.batch = static_cast<std::size_t>(bounded(batch_, "--batch", 1, 65536));
    const auto context = static_cast<std::int64_t>(job.model->context_length());
    t.seq = static_cast<std::size_t>(seq_ ? bounded(*seq_, "--seq", 1, context) : context);
    t.learning_rate = static_cast<float>(finite_number(lr_, "--lr"));
    if (!(t.learning_rate > 0 && t.learning_rate <= 1)) {
      throw InvalidArgument("--lr is " + lr_ + "; expected more than 0 and at most 1");
    }
    t.warmup =
        warmup_ ? bounded(*warmup_, "--warmup", 0, t.steps) : std::min<std::int64_t>(10, t.steps);
    t.seed = static_cast<std::uint64_t>(bounded(seed_, "--seed", 0, INT64_MAX));
    t.zero = static_cast<int>(bounded(zero_, "--zero", 0, 3));
    t.overlap = !no_overlap_;
    job.eval_every = bounded(eval_every_, "--eval-every", 0, t.steps);
    job.checkpoints = checkpoint_flags_;
    job.checkpoints.save_every = integer(save_every_, "--save-every");
    job.checkpoints.keep = integer(keep_, "--keep");
    if (job.checkpoints.resume && job.checkpoints.resume->empty()) {
      throw InvalidArgument("--resume is an empty path");
    }
    if (init_from_) {
      // The folder's own model, or one that is the same (a preset or file of its sizes).
      const auto held =
          model_definition(*init_from_, "--init-from", folder_model ? nullptr : &notes);
      if (held->family() != job.model->family() ||
          held->config_json() != job.model->config_json()) {
        throw InvalidArgument("--init-from '" + echo_input(*init_from_, 200) + "' holds " +
                              held->describe() + "; --model is " + job.model->describe());
      }
      job.checkpoints.init_from = models::hf_initial_values(*init_from_, job.model);
      job.checkpoints.init_from_words = "--init-from '" + echo_input(*init_from_, 200) + "'";
    }
    job.recompute = parse_recompute(recompute_, "--recompute");
    job.sequence_parallel = sequence_parallel_;
    job.threads =
        threads_ ? static_cast<int>(bounded(*threads_, "--threads", 1, 256)) : (ranks > 1 ? 1 : 0);
    const ScopedBlas blas(blas_);
    for (const char* flag : {"--schedule", "--microbatches", "--virtual-stages", "--stages-by"}) {
      if (app_->get_option(flag)->count() > 0) {
        job.pipeline = pipeline_request(schedule_, microbatches_, virtual_stages_, stages_by_);
        break;
      }
    }
    const bool pipelined = job.mesh.has_axis("pipeline") && job.mesh.axis_size("pipeline") > 1;
    if (!job.pipeline && pipelined) {
      job.pipeline = pipeline_request(schedule_, microbatches_, virtual_stages_, stages_by_);
    }
    job.param_sharding = param_sharding_;
    job.sharding_rules = read_param_sharding_rules(param_sharding_, job.mesh);
    job.log_dir = log_dir_;
    job.timeline = timeline_;
    job.caller_settings = {{"--json", json_ ? "on" : "off"}};
    const train::TrainingJob training(std::move(job));
    show_notes("train", notes);
    const BackendInfo& backend = backend_from(backend_);
    training.check_memory(backend);
    TrainPrinter printer(out, json_, bounded(print_every_, "--print-every", 1, INT64_MAX));
    training.run(backend, printer);
  }

 private:
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
  std::optional<std::string> tokenizer_;
  std::string eval_every_;
  std::string print_every_;
  std::optional<std::string> threads_;
  std::optional<std::string> backend_;
  std::optional<std::string> log_dir_;
  std::string recompute_ = "none";
  std::string blas_ = "onednn";
  train::CheckpointPolicy checkpoint_flags_;
  std::optional<std::string> init_from_;
  std::string save_every_ = "0";
  std::string keep_ = "0";
  std::string schedule_;
  std::optional<std::string> microbatches_;
  std::optional<std::string> virtual_stages_;
  std::string stages_by_;
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

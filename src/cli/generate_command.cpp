// `shardwise generate`: text from a trained model (a checkpoint, a --save folder's newest, a
// Hugging Face folder), on one rank or split over a 'model' mesh, in process or under mpirun.
// The library does the work (models::open_model_source, models::prompt_codec,
// train::GenerationJob); this file reads the flags and prints.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "../detail/file_io.hpp"
#include "backend_flag.hpp"
#include "blas_flag.hpp"
#include "command.hpp"
#include "notes.hpp"
#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/models/model_source.hpp"
#include "shardwise/models/prompt_codec.hpp"
#include "shardwise/train/generation_job.hpp"

namespace shardwise::cli {
namespace {

// How generation's settings are named to this command's user: its flags.
const train::SettingNames& generate_flags() {
  static const train::SettingNames names({{"model", "model"},
                                          {"mesh", "--mesh"},
                                          {"temperature", "--temperature"},
                                          {"top_p", "--top-p"},
                                          {"threads", "--threads"},
                                          {"stop_tokens", "--stop-ids"},
                                          {"tokenizer", "--tokenizer"},
                                          {"prompt_ids", "--prompt-ids"}});
  return names;
}

class GenerateCommand final : public Command {
 public:
  explicit GenerateCommand(CLI::App& parent)
      : app_(parent.add_subcommand(
            "generate",
            "Write text with a trained model: a checkpoint, a --save folder (its newest) or a "
            "Hugging Face folder, on one rank or split over a 'model' mesh")) {
    app_->add_option("model", model_,
                     "A checkpoint, a --save folder (its newest) or a Hugging Face folder "
                     "(config.json, model.safetensors, tokenizer.json)")
        ->required();
    app_->add_option("--prompt", prompt_, "The text to continue");
    app_->add_option("--prompt-file", prompt_file_, "A file holding the text to continue");
    app_->add_option("--prompt-ids", prompt_ids_, "The token ids to continue: 464,3290,318");
    app_->add_option("--tokenizer", tokenizer_,
                     "A tokenizer.json (byte-level BPE) for the text (default: the Hugging Face "
                     "folder's; a model of 256 tokens reads bytes)");
    app_->add_option("--max-new-tokens", max_new_tokens_, "Tokens to add, at most")
        ->default_val("64");
    app_->add_option("--temperature", temperature_, "0 (the default): greedy; else sampled")
        ->default_val("0");
    app_->add_option("--top-k", top_k_, "Draw among the K most likely tokens (0: all)")
        ->default_val("0");
    app_->add_option("--top-p", top_p_, "Draw among the fewest most likely reaching P (1: all)")
        ->default_val("1");
    app_->add_option("--seed", seed_, "The draws' seed")->default_val("0");
    app_->add_option("--stop-ids", stop_ids_,
                     "Ids that end the text (default: generation_config.json's eos_token_id, else "
                     "config.json's; 'none')");
    app_->add_option("--mesh", mesh_, "A 'model' axis to split the model over: model=2");
    app_->add_option("--backend", backend_, "local or mpi (default: mpi under mpirun)");
    app_->add_option("--threads", threads_, "BLAS threads per rank (default 1 with several ranks)");
    app_->add_option("--precision", precision_,
                     "fp32, or bf16 (the products on bf16 copies of the weights and bf16 "
                     "roundings of their inputs, accumulating in float32)")
        ->default_val("fp32");
    add_blas_option(*app_, blas_);
    app_->add_flag("--json", json_, "One JSON object: ids, text, timings");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    const int prompts = (prompt_ ? 1 : 0) + (prompt_file_ ? 1 : 0) + (prompt_ids_ ? 1 : 0);
    if (prompts != 1) {
      throw InvalidArgument("give the prompt once: --prompt, --prompt-file or --prompt-ids");
    }
    const train::SettingNames& named = generate_flags();
    train::GenerationSettings settings;
    settings.mesh = Mesh::parse(mesh_ ? *mesh_ : "model=1");
    settings.names = named;
    settings.precision = parse_precision(precision_, "--precision");
    train::GenerationOptions& options = settings.options;
    options.max_new_tokens =
        static_cast<std::size_t>(bounded(max_new_tokens_, "--max-new-tokens", 0, 1 << 24));
    options.sampling.temperature = finite_number(temperature_, "--temperature");
    options.sampling.top_k = static_cast<std::size_t>(bounded(top_k_, "--top-k", 0, INT32_MAX));
    options.sampling.top_p = finite_number(top_p_, "--top-p");
    options.sampling.seed = static_cast<std::uint64_t>(bounded(seed_, "--seed", 0, INT64_MAX));
    if (threads_) settings.threads = static_cast<int>(bounded(*threads_, "--threads", 1, 256));
    // The mesh and the sampling are checked before the model is read.
    train::GenerationJob::check_before_model(settings);

    const models::ModelSource source = models::open_model_source(model_, "model");
    show_notes("generate", source.notes);
    const models::PromptCodec codec = models::prompt_codec(source, tokenizer_, named);
    std::vector<std::int32_t> prompt;
    if (prompt_ids_) {
      prompt = parse_token_ids(*prompt_ids_, "--prompt-ids", source.model->vocab_size());
    } else if (prompt_) {
      prompt = codec.encode(*prompt_, "--prompt");
    } else {
      // Read as it is encoded, and no further than the context: a huge file costs nothing.
      prompt = codec.encode_file(*prompt_file_, "--prompt-file", source.model->context_length());
    }
    options.stop_tokens = stop_ids_ ? parse_stop_ids(*stop_ids_, source.model->vocab_size())
                                    : models::end_tokens_of(source, named);
    settings.model = source.model;
    settings.values = source.values;
    settings.values_identity = source.identity;

    const ScopedBlas blas(blas_);
    const BackendInfo& backend = backend_from(backend_);
    // What cannot run is refused before any rank starts: the split, the prompt's length.
    const train::GenerationJob job(std::move(settings));
    job.check_prompt(prompt);
    const std::optional<train::GenerationResult> generated = job.run(backend, prompt);
    if (!generated) return;  // another process of the job prints
    print(out, source, codec, prompt, *generated, job.settings().mesh, backend.name);
  }

 private:
  void print(std::ostream& out, const models::ModelSource& source, const models::PromptCodec& codec,
             const std::vector<std::int32_t>& prompt, const train::GenerationResult& result,
             const Mesh& mesh, const std::string& backend) const {
    // The text leaves out a final end-of-text id (the ids keep it).
    std::vector<std::int32_t> shown = result.tokens;
    if (result.stop == train::StopReason::kStopToken && !shown.empty()) shown.pop_back();
    const std::string text = codec.decode(shown);
    if (json_) {
      nlohmann::json j{{"prompt_ids", prompt},
                       {"ids", result.tokens},
                       {"prompt", codec.decode(prompt)},
                       {"text", text},
                       {"stop", train::to_string(result.stop)},
                       {"prompt_tokens", result.prompt_tokens},
                       {"new_tokens", result.tokens.size()},
                       {"prefill_seconds", result.prefill_seconds},
                       {"decode_seconds", result.decode_seconds},
                       {"decode_tokens_per_second", result.decode_tokens_per_second()},
                       {"model", source.model->describe()},
                       {"source", source.words},
                       {"tokenizer", codec.words},
                       {"mesh", mesh.to_string()},
                       {"backend", backend}};
      out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return;
    }
    out << codec.decode(prompt) << text << "\n";
    std::ostringstream stats;
    stats << "[" << result.tokens.size() << " new tokens, stopped at "
          << train::to_string(result.stop) << "; prompt " << result.prompt_tokens << " tokens in "
          << std::fixed << std::setprecision(3) << result.prefill_seconds << " s, decoding "
          << std::setprecision(1) << result.decode_tokens_per_second() << " tokens/s on "
          << mesh.size() << " rank" << (mesh.size() == 1 ? "" : "s") << "]";
    out << stats.str() << "\n";
  }

  CLI::App* app_;
  std::string model_;
  std::optional<std::string> prompt_, prompt_file_, prompt_ids_, tokenizer_;
  std::string max_new_tokens_, temperature_, top_k_, top_p_, seed_;
  std::optional<std::string> stop_ids_, mesh_, threads_;
  std::string precision_ = "fp32";
  std::optional<std::string> backend_;
  std::string blas_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_generate_command(CLI::App& parent) {
  return std::make_unique<GenerateCommand>(parent);
}

}  // namespace shardwise::cli

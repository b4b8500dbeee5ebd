// `shardwise generate`: text from a trained model (a checkpoint, a --save folder's newest, a
// Hugging Face folder), on one rank or split over a 'model' mesh, in process or under mpirun.
// The library does the work (models::open_model_source, train::DecodingModel); this file reads
// the flags, encodes the prompt and prints.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <mutex>
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
#include "prompt_codec.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/models/model_source.hpp"
#include "shardwise/train/decoding_model.hpp"
#include "shardwise/train/parallel_context.hpp"

namespace shardwise::cli {
namespace {

// How generation's settings are named to this command's user: its flags.
const train::SettingNames& generate_flags() {
  static const train::SettingNames names(
      {{"mesh", "--mesh"}, {"temperature", "--temperature"}, {"top_p", "--top-p"}});
  return names;
}

// What rank 0 generated, for the printer.
struct Generated {
  train::GenerationResult result;
  bool held = false;
};

// The source's end-of-text ids, each an id of the model's vocabulary.
std::vector<std::int32_t> end_tokens_of(const models::ModelSource& source) {
  std::vector<std::int32_t> ids;
  for (const std::int64_t id : source.end_tokens) {
    if (id < 0 || id >= static_cast<std::int64_t>(source.model->vocab_size())) {
      throw InvalidArgument(source.words + ": " + source.end_tokens_from + "'s eos_token_id " +
                            std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(source.model->vocab_size()) +
                            "; give --stop-ids (ids, or none)");
    }
    ids.push_back(static_cast<std::int32_t>(id));
  }
  return ids;
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
    add_blas_option(*app_, blas_);
    app_->add_flag("--json", json_, "One JSON object: ids, text, timings");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    const int prompts = (prompt_ ? 1 : 0) + (prompt_file_ ? 1 : 0) + (prompt_ids_ ? 1 : 0);
    if (prompts != 1) {
      throw InvalidArgument("give the prompt once: --prompt, --prompt-file or --prompt-ids");
    }
    const Mesh mesh = Mesh::parse(mesh_ ? *mesh_ : "model=1");
    train::ParallelContext::validate(mesh, static_cast<int>(mesh.size()));
    train::DecodingModel::check_mesh(mesh, generate_flags());
    train::GenerationOptions options;
    options.max_new_tokens =
        static_cast<std::size_t>(bounded(max_new_tokens_, "--max-new-tokens", 0, 1 << 24));
    options.sampling.temperature = finite_number(temperature_, "--temperature");
    options.sampling.top_k = static_cast<std::size_t>(bounded(top_k_, "--top-k", 0, INT32_MAX));
    options.sampling.top_p = finite_number(top_p_, "--top-p");
    options.sampling.seed = static_cast<std::uint64_t>(bounded(seed_, "--seed", 0, INT64_MAX));
    train::validate(options.sampling, generate_flags());

    const models::ModelSource source = models::open_model_source(model_, "model");
    show_notes("generate", source.notes);
    const PromptCodec codec = prompt_codec(source, tokenizer_);
    std::vector<std::int32_t> prompt;
    if (prompt_ids_) {
      prompt = parse_token_ids(*prompt_ids_, "--prompt-ids", source.model->vocab_size());
    } else if (prompt_) {
      prompt = codec.encode(*prompt_, "--prompt");
    } else {
      // Read as it is encoded, and no further than the context: a huge file costs nothing.
      prompt = codec.encode_file(*prompt_file_, "--prompt-file", source.model->context_length());
    }
    options.stop_tokens =
        stop_ids_ ? parse_stop_ids(*stop_ids_, source.model->vocab_size()) : end_tokens_of(source);

    const int ranks = static_cast<int>(mesh.size());
    const int threads =
        threads_ ? static_cast<int>(bounded(*threads_, "--threads", 1, 256)) : (ranks > 1 ? 1 : 0);
    const ScopedBlas blas(blas_);
    const BackendInfo& backend = backend_from(backend_);
    std::mutex mutex;
    Generated generated;
    // What cannot run is refused before any rank starts: the split, the prompt's length.
    const int degree = static_cast<int>(mesh.size());
    (void)source.model->model_placements(degree);
    (void)source.model->shared_rows(degree);
    if (prompt.empty()) throw InvalidArgument("the prompt is empty: generation needs a token");
    if (prompt.size() >= source.model->context_length()) {
      throw InvalidArgument(
          "the prompt has " +
          std::string(prompt.size() > source.model->context_length() ? "more than " : "") +
          std::to_string(std::min(prompt.size(), source.model->context_length())) +
          " tokens; the model's context of " + std::to_string(source.model->context_length()) +
          " leaves no room for a new one");
    }
    // A rank's input error (a file it reads) stays the user's error, not the runtime's.
    std::optional<std::string> input_error;
    try {
      backend.run(nullptr, nullptr, ranks, [&](Communicator& comm) {
        try {
          if (comm.size() != mesh.size()) {
            throw InvalidArgument("--mesh " + mesh.to_string() + " has " +
                                  std::to_string(mesh.size()) + " devices but the job has " +
                                  std::to_string(comm.size()) + " ranks");
          }
          if (threads > 0) kernels::set_blas_threads(threads);
          const train::ParallelContext context(comm, mesh);
          train::DecodingModel model(source.model, context, source.values, 0, source.identity);
          train::GenerationResult result = model.generate(prompt, options);
          if (comm.rank() == 0) {
            const std::lock_guard lock(mutex);
            generated = {std::move(result), true};
          }
        } catch (const CommError&) {
          throw;
        } catch (const Error& e) {
          const std::lock_guard lock(mutex);
          if (!input_error) input_error = e.what();
          throw;
        }
      });
    } catch (const Error&) {
      if (input_error) throw InvalidArgument(*input_error);
      throw;
    }
    if (!generated.held) return;  // another process of the job prints
    print(out, source, codec, prompt, generated.result, mesh, backend.name);
  }

 private:
  void print(std::ostream& out, const models::ModelSource& source, const PromptCodec& codec,
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
  std::optional<std::string> backend_;
  std::string blas_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_generate_command(CLI::App& parent) {
  return std::make_unique<GenerateCommand>(parent);
}

}  // namespace shardwise::cli

// `shardwise ckpt inspect|export|import`: what a checkpoint holds, a trained model leaving as
// Hugging Face GPT-2 weights, and such weights coming in as a sharded checkpoint.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>

#include "../detail/file_io.hpp"
#include "../detail/output_file.hpp"
#include "backend_flag.hpp"
#include "command.hpp"
#include "notes.hpp"
#include "number_text.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_folders.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/ckpt/checkpoint_save.hpp"
#include "shardwise/ckpt/safetensors_file.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/safetensors.hpp"
#include "shardwise/kernels/cross_entropy.hpp"
#include "shardwise/models/hf_checkpoint.hpp"
#include "shardwise/models/hf_weights.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/models/model_resolution.hpp"
#include "shardwise/models/model_source.hpp"
#include "shardwise/models/prompt_codec.hpp"
#include "shardwise/text/text_stream.hpp"
#include "shardwise/text/tokenizer.hpp"
#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/fine_tuning_data.hpp"
#include "shardwise/train/loss_evaluation.hpp"
#include "shardwise/train/token_source.hpp"
#include "text_table.hpp"

namespace shardwise::cli {
namespace {

// How the library's settings are named to this command's user: its flags.
const train::SettingNames& ckpt_flags() {
  static const train::SettingNames names(
      std::map<std::string, std::string, std::less<>>{{"tokenizer", "--tokenizer"}});
  return names;
}

// The checkpoint PATH names (a checkpoint, the newest in a --save folder, or a .safetensors
// file read as one).
ckpt::CheckpointReader open_checkpoint(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error) ||
      !std::filesystem::is_directory(path, error)) {
    if (!std::filesystem::exists(path, error)) {
      throw ckpt::CheckpointError("'" + echo_input(path, 200) + "' does not exist");
    }
    return ckpt::CheckpointReader::from_safetensors(path);
  }
  return ckpt::CheckpointReader(ckpt::resolve_checkpoint(path, "checkpoint"));
}

void inspect(const std::string& path, bool json, bool verify, std::ostream& out) {
  const ckpt::CheckpointReader reader = open_checkpoint(path);
  const ckpt::CheckpointIndex& index = reader.index();
  const std::uint64_t verified = verify ? reader.verify() : 0;
  std::size_t files = 0;
  {
    std::vector<std::string> names;
    for (const ckpt::ArrayRecord& array : index.arrays) {
      for (const ckpt::ShardRecord& shard : array.shards) names.push_back(shard.file);
    }
    std::sort(names.begin(), names.end());
    files = static_cast<std::size_t>(std::unique(names.begin(), names.end()) - names.begin());
  }
  const nlohmann::json metadata = nlohmann::json::parse(index.metadata_json);
  if (json) {
    nlohmann::json arrays = nlohmann::json::array();
    for (const ckpt::ArrayRecord& array : index.arrays) {
      std::uint64_t bytes = 0;
      for (const ckpt::ShardRecord& shard : array.shards) bytes += shard.length;
      arrays.push_back({{"name", array.name},
                        {"shape", array.shape},
                        {"dtype", to_string(array.dtype)},
                        {"sharding", array.sharding},
                        {"shards", array.shards.size()},
                        {"bytes", bytes}});
    }
    nlohmann::json result{{"folder", utf8_text(reader.folder().string())},
                          {"bytes", index.total_bytes()},
                          {"files", files},
                          {"metadata", metadata},
                          {"arrays", arrays}};
    if (metadata.contains("step")) result["step"] = metadata["step"];
    if (verify) result["verified_bytes"] = verified;
    out << result.dump() << "\n";
    return;
  }
  out << "checkpoint " << echo_input(reader.folder().string(), 1000) << "\n";
  if (metadata.contains("step")) out << "step " << metadata["step"].dump() << "\n";
  if (metadata.contains("model")) out << "model " << metadata["model"].dump() << "\n";
  out << index.arrays.size() << " arrays, " << index.total_bytes() << " bytes in " << files
      << " file" << (files == 1 ? "" : "s") << "\n";
  std::vector<std::vector<std::string>> rows{{"array", "shape", "dtype", "shards", "sharding"}};
  for (const ckpt::ArrayRecord& array : index.arrays) {
    rows.push_back({array.name, to_string(array.shape), to_string(array.dtype),
                    std::to_string(array.shards.size()), array.sharding});
  }
  out << format_table(rows);
  if (verify) out << "verified: " << verified << " bytes read, every checksum matches\n";
}

// How the library's settings are named to ckpt export and import's user.
const train::SettingNames& hf_flags() {
  static const train::SettingNames names(
      std::map<std::string, std::string, std::less<>>{{"out", "--out"},
                                                      {"force", "--force"},
                                                      {"format", "--format"},
                                                      {"model", "--model"},
                                                      {"ranks", "--ranks"},
                                                      {"dtype", "--dtype"}});
  return names;
}

void export_hf(const std::string& path, const std::string& format, const std::string& folder,
               bool force, const std::string& dtype, std::ostream& out) {
  const DType written = parse_float_dtype(dtype, "--dtype");
  const models::HfExportResult result =
      models::export_to_hf({path, format, folder, force, written, hf_flags()});
  out << "exported step " << result.step << " of " << echo_input(result.checkpoint.string(), 200)
      << " to " << echo_input(folder, 200) << "/model.safetensors (" << result.tensors
      << " tensors in " << (written == DType::kBF16 ? "bfloat16" : "float32") << ", "
      << result.layout << " layout) and " << echo_input(folder, 200) << "/config.json\n";
}

void import_hf(const std::string& path, const std::string& format,
               const std::optional<std::string>& model, const std::string& folder,
               std::optional<int> ranks, bool force, const std::optional<std::string>& backend_flag,
               std::ostream& out) {
  const models::HfImport import({path, format, model, folder, force, ranks, hf_flags()});
  show_notes("ckpt", import.notes());
  const std::optional<models::HfImportResult> result = import.run(backend_from(backend_flag));
  if (!result) return;  // another process of the job reports
  out << "imported " << echo_input(result->file.string(), 200) << " as a checkpoint of step 0 in "
      << echo_input(folder, 200) << " (" << result->bytes << " bytes, " << result->parameters
      << " parameters, without optimizer state, " << result->ranks << " rank"
      << (result->ranks == 1 ? "" : "s") << "); train --resume " << echo_input(folder, 200)
      << " continues from it on any layout\n";
}

// The first `most` tokens of --data: a token file's ids, or text as the tokenizer (--tokenizer,
// else the Hugging Face folder's own) encodes it, or bytes for a model of 256 tokens.
std::vector<std::int32_t> loss_tokens(const models::ModelSource& source, const std::string& data,
                                      const std::string& format,
                                      const std::optional<std::string>& tokenizer_flag,
                                      std::size_t most) {
  const train::TokenFormat token_format = train::parse_token_format(format, "--data-format");
  const std::size_t vocab = source.model->vocab_size();
  const std::string what = "--data '" + echo_input(data, 200) + "'";
  const std::filesystem::path tokenizer =
      models::tokenizer_file(source, tokenizer_flag, ckpt_flags());
  if (tokenizer_flag && token_format != train::TokenFormat::kText) {
    throw InvalidArgument("--tokenizer encodes text, and --data-format " + format +
                          " is ids already");
  }
  if (token_format == train::TokenFormat::kText && !tokenizer.empty()) {
    return models::encode_file_prefix(
        *models::model_tokenizer(source, tokenizer, tokenizer_flag.has_value(), ckpt_flags()), data,
        what, most);
  }
  if (token_format == train::TokenFormat::kText && vocab != 256) {
    throw InvalidArgument(what + " is text and " + source.words + " has a vocabulary of " +
                          std::to_string(vocab) +
                          " tokens with no tokenizer.json: text is read as bytes for a model of "
                          "256 tokens alone; give --tokenizer, or token files (--data-format)");
  }
  const std::shared_ptr<const train::TokenSource> file =
      train::file_source(data, token_format, "--data");
  std::vector<std::int32_t> tokens;
  tokens.resize(std::min(file->size(), most));
  file->read(0, tokens.size(), tokens.data());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= vocab) {
      throw InvalidArgument(
          what + ": token " + std::to_string(i) + " is " +
          (tokens[i] < 0 ? std::string("above 2^31") : std::to_string(tokens[i])) +
          ", outside the model's vocabulary 0.." + std::to_string(vocab - 1));
    }
  }
  return tokens;
}

// The first `most` examples of a JSON Lines file, encoded by --tokenizer or the source's own.
std::shared_ptr<const train::ExampleSet> loss_examples(
    const models::ModelSource& source, const std::string& data,
    const std::optional<std::string>& tokenizer_flag, std::size_t most) {
  const std::filesystem::path tokenizer =
      models::tokenizer_file(source, tokenizer_flag, ckpt_flags());
  if (tokenizer.empty()) {
    throw InvalidArgument("--data '" + echo_input(data, 200) + "' is JSON Lines of examples, and " +
                          source.words + " has no tokenizer.json: give --tokenizer");
  }
  (void)models::model_tokenizer(source, tokenizer, tokenizer_flag.has_value(),
                                ckpt_flags());  // its checks
  const train::ExampleEncoder encoder = train::example_encoder_of(tokenizer.string());
  return train::read_json_lines(data, encoder, "--data", most);
}

// The mean next-token loss of a model (a checkpoint's, a --save folder's newest, a Hugging Face
// folder's) on a file's tokens: windows of `seq` tokens one after the other, each predicting the
// tokens one place on; as many as the file holds, up to 4096 windows. JSON Lines of examples: the
// mean over their counted tokens.
void model_loss(const std::string& path, const std::string& data, const std::string& format,
                bool format_given, const std::optional<std::string>& tokenizer,
                const std::optional<std::string>& seq_text, const std::string& precision_text,
                const std::string& residual_text, bool json, std::ostream& out) {
  const Precision precision = parse_precision(precision_text, "--precision");
  const DType residual = parse_float_dtype(residual_text, "--residual-dtype");
  if (residual == DType::kBF16 && precision != Precision::kBf16) {
    throw InvalidArgument("--residual-dtype is bf16 under --precision " + precision_text +
                          "; a bf16 residual stream is part of bf16 precision");
  }
  const models::ModelSource source = models::open_model_source(path, "path");
  show_notes("ckpt", source.notes);
  // The values, their gradients and the buffers of one window.
  models::check_model_fits(*source.model, 3, "computing the loss of " + source.words);
  const std::size_t seq =
      seq_text
          ? static_cast<std::size_t>(bounded(
                *seq_text, "--seq", 1, static_cast<std::int64_t>(source.model->context_length())))
          : source.model->context_length();
  constexpr std::size_t kMostWindows = 4096;
  // The data is read before the weights: a bad file is refused before gigabytes are loaded.
  const bool examples = format == "jsonl" || (!format_given && data.ends_with(".jsonl"));
  if (examples) {
    const auto set = loss_examples(source, data, tokenizer, kMostWindows);
    train::DistributedModel model(source.model, 0, precision, residual);
    models::load_whole(source, model.parameters());
    const train::ExampleLoss result = [&] {
      try {
        return train::example_loss(model, *set, seq);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument("--data '" + echo_input(data, 200) + "': " + e.what());
      }
    }();
    if (json) {
      nlohmann::json line{{"loss", result.loss},
                          {"examples", result.examples},
                          {"counted_tokens", result.counted},
                          {"seq", seq}};
      line["step"] = source.step ? nlohmann::json(*source.step) : nlohmann::json(nullptr);
      out << line.dump() << "\n";
      return;
    }
    out << "loss " << std::setprecision(7) << result.loss << " over the " << result.counted
        << " counted tokens of " << result.examples << " examples ("
        << (source.step ? "step " + std::to_string(*source.step) : source.words) << ")\n";
    return;
  }
  const std::vector<std::int32_t> tokens =
      loss_tokens(source, data, format, tokenizer, kMostWindows * seq + 1);
  if (tokens.size() < seq + 1) {
    throw InvalidArgument("--data '" + echo_input(data, 200) + "' has " +
                          std::to_string(tokens.size()) + " tokens; a window of " +
                          std::to_string(seq) + " needs " + std::to_string(seq + 1));
  }
  train::DistributedModel model(source.model, 0, precision, residual);
  models::load_whole(source, model.parameters());
  const train::WindowLoss measured = train::window_loss(model, tokens, seq);
  const double loss = measured.loss;
  const std::size_t windows = measured.windows;
  if (json) {
    nlohmann::json result{{"loss", loss}, {"windows", windows}, {"seq", seq}};
    result["step"] = source.step ? nlohmann::json(*source.step) : nlohmann::json(nullptr);
    out << result.dump() << "\n";
    return;
  }
  out << "loss " << std::setprecision(7) << loss << " over " << windows << " windows of " << seq
      << " tokens (" << (source.step ? "step " + std::to_string(*source.step) : source.words)
      << ")\n";
}

class CkptCommand final : public Command {
 public:
  explicit CkptCommand(CLI::App& parent)
      : app_(parent.add_subcommand(
            "ckpt",
            "Inspect and verify checkpoints, compute a model's loss on a file, and move "
            "checkpoints to and from Hugging Face (GPT-2, Llama)")) {
    app_->require_subcommand(1);
    inspect_ = app_->add_subcommand("inspect", "What a checkpoint holds: arrays, shardings, step");
    inspect_
        ->add_option("path", path_,
                     "A checkpoint, a --save folder (its newest) or a "
                     ".safetensors file")
        ->required();
    inspect_->add_flag("--json", json_, "One JSON object");
    inspect_->add_flag("--verify", verify_, "Read every byte and check every checksum");
    export_ = app_->add_subcommand("export", "Write a checkpoint's model as one model.safetensors");
    export_->add_option("path", path_, "A checkpoint or a --save folder (its newest)")->required();
    export_
        ->add_option("--format", format_,
                     "hf-gpt2 (transformers' GPT2LMHeadModel) or hf-llama (LlamaForCausalLM)")
        ->required();
    export_->add_option("--out", out_, "The folder to write model.safetensors and config.json to")
        ->required();
    export_->add_flag("--force", force_,
                      "Replace a model.safetensors and config.json already in --out (regular "
                      "files only; a symlink or FIFO there is always refused)");
    export_
        ->add_option("--dtype", dtype_,
                     "What the weights are written in: float32 (as trained) or bfloat16 "
                     "(rounded to nearest even; config.json's torch_dtype says so)")
        ->default_val("float32");
    loss_ = app_->add_subcommand("loss", "The model's mean next-token loss on a file's tokens");
    loss_
        ->add_option("path", path_,
                     "A checkpoint, a --save folder (its newest) or a Hugging Face folder")
        ->required();
    loss_
        ->add_option("--data", data_,
                     "A text file (encoded by --tokenizer or the model's tokenizer.json; bytes "
                     "for a model of 256 tokens), a token file (--data-format) or JSON Lines of "
                     "fine-tuning examples")
        ->required();
    loss_->add_option("--tokenizer", tokenizer_,
                      "The tokenizer.json that encodes text --data (default: the Hugging Face "
                      "folder's)");
    loss_
        ->add_option("--data-format", data_format_,
                     "text, tokens-u16, tokens-u32 or jsonl (examples: the loss on their "
                     "completions and assistants' turns; default for *.jsonl)")
        ->default_val("text");
    loss_->add_option("--seq", seq_, "Tokens per window (default: the model's context)");
    loss_
        ->add_option("--precision", precision_,
                     "fp32, or bf16 (the products on bf16 roundings, as `train --precision "
                     "bf16` computes)")
        ->default_val("fp32");
    loss_
        ->add_option("--residual-dtype", residual_dtype_,
                     "fp32, or bf16 under --precision bf16 (the residual stream rounded at each "
                     "add, as `train --residual-dtype bf16` computes)")
        ->default_val("fp32");
    loss_->add_flag("--json", json_, "One JSON object");
    import_ = app_->add_subcommand("import",
                                   "Turn Hugging Face GPT-2 or Llama weights into a checkpoint");
    import_->add_option("path", path_, "model.safetensors, or a folder holding it and config.json")
        ->required();
    import_->add_option("--format", format_, "hf-gpt2 or hf-llama")->required();
    import_->add_option("--out", out_, "The checkpoint folder to write")->required();
    import_->add_option("--model", model_,
                        "The model (a preset or a model file) where there is no "
                        "config.json beside the file");
    import_->add_option("--ranks", ranks_,
                        "Ranks that read and write it in parallel (default 1; under mpirun the "
                        "job's processes)");
    import_->add_flag("--force", force_,
                      "Replace a checkpoint already at --out that an import wrote (never "
                      "another folder)");
    import_->add_option("--backend", backend_, "local or mpi (default: mpi under mpirun)");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    if (inspect_->parsed()) {
      inspect(path_, json_, verify_, out);
    } else if (export_->parsed()) {
      export_hf(path_, format_, out_, force_, dtype_, out);
    } else if (loss_->parsed()) {
      model_loss(path_, data_, data_format_, loss_->get_option("--data-format")->count() > 0,
                 tokenizer_, seq_, precision_, residual_dtype_, json_, out);
    } else {
      std::optional<int> ranks;
      if (import_->get_option("--ranks")->count() > 0) {
        ranks = static_cast<int>(bounded(ranks_, "--ranks", 1, 4096));
      }
      import_hf(path_, format_, model_, out_, ranks, force_, backend_, out);
    }
  }

 private:
  CLI::App* app_;
  CLI::App* inspect_;
  CLI::App* export_;
  CLI::App* import_;
  CLI::App* loss_;
  std::string data_;
  std::string data_format_ = "text";
  std::optional<std::string> tokenizer_;
  std::optional<std::string> seq_;
  std::string precision_ = "fp32";
  std::string residual_dtype_ = "fp32";
  std::string dtype_ = "float32";
  std::string path_;
  std::string format_;
  std::string out_;
  std::optional<std::string> model_;
  std::string ranks_ = "1";
  std::optional<std::string> backend_;
  bool json_ = false;
  bool verify_ = false;
  bool force_ = false;
};

}  // namespace

std::unique_ptr<Command> add_ckpt_command(CLI::App& parent) {
  return std::make_unique<CkptCommand>(parent);
}

}  // namespace shardwise::cli

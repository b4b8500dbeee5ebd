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

// The bytes of `copies` float32 copies of the model's parameters, refused (naming `what`) where
// they would not fit in half this machine's memory: checked before any of them is allocated.
void check_model_fits(const train::ModelDefinition& model, double copies, const std::string& what) {
  double elements = 0;
  for (const train::ParameterSpec& spec : model.parameters()) {
    double n = 1;
    for (const std::int64_t size : spec.shape) n *= static_cast<double>(size);
    elements += n;
  }
  const double bytes = elements * 4 * copies;
  check_fits(bytes > 9e18 ? INT64_MAX : static_cast<std::int64_t>(bytes), what);
}

// The Hugging Face adapter --format names, among the registered families'.
const models::HfAdapter& hf_adapter(const std::string& format) {
  std::string formats;
  for (const models::ModelFamily& family : models::model_families()) {
    if (!family.hugging_face) continue;
    if (family.hugging_face->format() == format) return *family.hugging_face;
    formats += (formats.empty() ? "" : ", ") + family.hugging_face->format();
  }
  throw InvalidArgument("--format is '" + echo_input(format) + "'; expected " + formats);
}

constexpr char kForceHint[] = "; --force replaces it";

// The metadata an export writes beside safetensors' "format", so that --force can tell an earlier
// export from a folder transformers or the Hub made.
constexpr char kExportMark[] = "shardwise";
constexpr char kExportMarkValue[] = "ckpt export";

// Whether `file` is a model.safetensors that `ckpt export` wrote (its header's metadata says so);
// false for anything else, a file that cannot be read among them.
bool exported_by_shardwise(const std::filesystem::path& file) {
  try {
    const auto [header, data_bytes] = ckpt::read_safetensors_header(file);
    for (const auto& [key, value] : parse_safetensors_header(header, data_bytes).metadata) {
      if (key == kExportMark && value == kExportMarkValue) return true;
    }
  } catch (const std::exception&) {
  }
  return false;
}

void export_hf(const std::string& path, const std::string& format, const std::string& folder,
               bool force, std::ostream& out) {
  const models::HfAdapter& adapter = hf_adapter(format);
  if (folder.empty()) throw InvalidArgument("--out is an empty path");
  // What is in the way is found before anything is read: a user's Hugging Face folder keeps
  // its files unless --force, and a symlink, FIFO or folder in a file's place is never written.
  const auto policy =
      force ? shardwise::detail::IfExists::kReplaceFile : shardwise::detail::IfExists::kRefuse;
  const std::filesystem::path out_folder = folder;
  const shardwise::detail::PathKind kind = shardwise::detail::path_kind(out_folder);
  if (kind != shardwise::detail::PathKind::kAbsent) {
    if (kind != shardwise::detail::PathKind::kFolder && !std::filesystem::is_directory(folder)) {
      throw InvalidArgument("--out '" + echo_input(folder, 200) + "' is " +
                            shardwise::detail::path_kind_words(kind) + ", not a folder");
    }
    for (const char* name : {"model.safetensors", "config.json"}) {
      shardwise::detail::check_output_path(out_folder / name, policy, "--out", kForceHint);
    }
    // --force replaces an earlier export, never the files of a folder transformers or the Hub
    // made (a model.safetensors without the export's mark, or a config.json without one).
    const std::filesystem::path weights = out_folder / "model.safetensors";
    const bool has_weights =
        shardwise::detail::path_kind(weights) != shardwise::detail::PathKind::kAbsent;
    const bool has_config = shardwise::detail::path_kind(out_folder / "config.json") !=
                            shardwise::detail::PathKind::kAbsent;
    if (force && (has_weights || has_config) && !exported_by_shardwise(weights)) {
      throw InvalidArgument("--out '" + echo_input(folder, 200) + "' holds " +
                            (has_weights ? "a model.safetensors" : "a config.json") +
                            " that ckpt export did not write (a Hugging Face folder's own); it is "
                            "left as it is (--force replaces only an earlier export)");
    }
  }
  const ckpt::CheckpointReader reader(ckpt::resolve_checkpoint(path, "checkpoint"));
  const std::string what = "checkpoint '" + echo_input(reader.folder().string(), 200) + "'";
  const models::CheckpointInfo info = models::checkpoint_info(reader.index(), what);
  // Optimizer state stays behind: the export is the model.
  if (adapter.format() != models::hf_adapter_of(*info.model).format()) {
    throw InvalidArgument("--format " + format + " holds another family's models; " + what +
                          " holds " + info.model->describe());
  }
  models::require_model_arrays(reader.index(), *info.model, what);
  reader.check_files();
  // The trainer's values and their Hugging Face layout, both whole.
  check_model_fits(*info.model, 2, "exporting " + what);
  std::vector<std::vector<float>> values;
  std::vector<ckpt::SafetensorsEntry> entries;
  for (const train::ParameterSpec& spec : info.model->parameters()) {
    std::vector<float> whole(static_cast<std::size_t>(num_elements(spec.shape)));
    ShardIndex box;
    for (const std::int64_t size : spec.shape) box.push_back({0, size});
    const ckpt::BlockToLoad target{train::model_array(spec.name), spec.shape, DType::kF32, box,
                                   std::as_writable_bytes(std::span<float>(whole))};
    (void)reader.read({&target, 1});
    if (std::string bad = train::non_finite_value(whole, target.array, box, what); !bad.empty()) {
      throw ckpt::CheckpointError(bad);
    }
    values.push_back(adapter.to_hf(spec.name, spec.shape, whole));
    entries.push_back({spec.name, DType::kF32, adapter.hf_shape(spec.name, spec.shape),
                       std::as_bytes(std::span<const float>(values.back()))});
  }
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    throw ckpt::CheckpointError("cannot make the folder '" + echo_input(folder, 200) +
                                "': " + error.message());
  }
  ckpt::write_safetensors_file(out_folder / "model.safetensors", entries,
                               {{"format", "pt"}, {kExportMark, kExportMarkValue}},
                               {force, "--out", kForceHint});
  shardwise::detail::write_whole_file(
      out_folder / "config.json", adapter.hf_config_json(*info.model), policy, "--out", kForceHint);
  out << "exported step " << info.step << " of " << echo_input(reader.folder().string(), 200)
      << " to " << echo_input(folder, 200) << "/model.safetensors (" << entries.size()
      << " tensors, " << adapter.words() << " layout) and " << echo_input(folder, 200)
      << "/config.json\n";
}

// This rank's block of a parameter in an import over `ranks` ranks: dimension 0 cut into
// torch.chunk's parts (FSDP2's Shard(0)); empty for a rank past the parts.
ShardIndex import_box(const Shape& shape, int rank, int ranks) {
  ShardIndex box;
  for (const std::int64_t size : shape) box.push_back({0, size});
  if (shape.empty()) return rank == 0 ? box : ShardIndex{};
  const std::int64_t part = (shape[0] + ranks - 1) / ranks;
  box[0] = {std::min(shape[0], part * rank), std::min(shape[0], part * (rank + 1))};
  return box;
}

void import_hf(const std::string& path, const std::string& format,
               const std::optional<std::string>& model, const std::string& folder,
               std::optional<int> ranks_flag, bool force,
               const std::optional<std::string>& backend_flag, std::ostream& out) {
  const models::HfAdapter& adapter = hf_adapter(format);
  if (folder.empty()) throw InvalidArgument("--out is an empty path");
  const std::filesystem::path file = models::hf_weights_file(path);
  std::shared_ptr<const train::ModelDefinition> definition;
  if (model) {
    definition = models::model_definition(*model, "--model");
    if (models::hf_adapter_of(*definition).format() != adapter.format()) {
      throw InvalidArgument("--model " + echo_input(*model) + " is " + definition->describe() +
                            ", not a model --format " + format + " holds");
    }
  } else {
    std::vector<std::string> notes;
    definition = models::HfWeights::folder_model(file, adapter, notes);
    show_notes("ckpt", notes);
  }
  // Everything a rank would find wrong is found here, once, before any rank starts or any
  // parameter is allocated: the output's place, the file's tensors and their shapes, memory.
  // Every rank's blocks together hold the model once, and each its head's rows beside them:
  // checked on the config's sizes alone, before the file is opened.
  check_model_fits(*definition, 2, "importing '" + echo_input(file.string(), 200) + "'");
  // Only an earlier import is ever replaced (with --force), by a save under its run id.
  std::string import_run_id;  // empty: a run id of its own
  if (shardwise::detail::path_kind(folder) != shardwise::detail::PathKind::kAbsent) {
    std::optional<ckpt::CheckpointIndex> existing;
    try {
      existing = ckpt::CheckpointReader(folder).index();
    } catch (const Error&) {  // not a checkpoint: refused below
    }
    const bool an_import = existing && !existing->run_id.empty() &&
                           nlohmann::json::parse(existing->metadata_json).contains("imported_from");
    if (!force || !an_import) {
      throw InvalidArgument(
          "--out '" + echo_input(folder, 200) + "' exists" +
          (an_import ? " (an earlier import); it is left as it is" + std::string(kForceHint)
                     : "; it is left as it is (--force replaces only an "
                       "earlier import)"));
    }
    import_run_id = existing->run_id;
  }
  const std::vector<train::ParameterSpec> specs = definition->parameters();
  (void)models::HfWeights(file, adapter, definition);  // the file checked whole, once
  const BackendInfo& backend = backend_from(backend_flag);
  const int local_ranks = ranks_flag.value_or(1);
  std::mutex mutex;
  std::uint64_t total = 0;
  int ranks_run = 0;
  // A rank's error, kept as the user's (bad input, a full disk), not the runtime's.
  std::optional<std::string> rank_error;
  try {
    backend.run(nullptr, nullptr, local_ranks, [&](Communicator& comm) {
      if (backend.rank_per_process && ranks_flag && *ranks_flag != comm.size()) {
        throw InvalidArgument("--ranks is " + std::to_string(*ranks_flag) + ", but the job has " +
                              std::to_string(comm.size()) +
                              " processes (one rank each); give --ranks " +
                              std::to_string(comm.size()) + " or leave it out");
      }
      std::string error_text;
      std::vector<std::vector<float>> blocks;
      std::vector<ckpt::BlockToSave> saved;
      try {
        const models::HfWeights weights(file, adapter, definition);
        for (const train::ParameterSpec& spec : specs) {
          const ShardIndex box = import_box(spec.shape, comm.rank(), comm.size());
          if (box.empty() || is_empty(box)) continue;
          blocks.emplace_back(static_cast<std::size_t>(num_elements(shape_of(box))));
          weights.read(spec.name, box, blocks.back().data());
          saved.push_back({train::model_array(spec.name), spec.shape, DType::kF32,
                           "dimension 0 in " + std::to_string(comm.size()) + " parts (import)", box,
                           std::as_bytes(std::span<const float>(blocks.back()))});
        }
      } catch (const Error& e) {
        error_text = e.what();
      }
      try {
        ckpt::throw_unless_all_succeeded(comm, error_text, "not imported");
        nlohmann::json metadata =
            nlohmann::json::parse(train::checkpoint_metadata(definition->config_json(), 0, ""));
        metadata["imported_from"] = utf8_text(file.string());
        ckpt::SaveOptions options;
        options.run_id = import_run_id;
        const ckpt::SaveStats stats =
            ckpt::save_checkpoint(comm, folder, saved, metadata.dump(), options);
        if (comm.rank() == 0) {
          const std::lock_guard lock(mutex);
          total = stats.bytes_total;
          ranks_run = comm.size();
        }
      } catch (const CommError&) {
        throw;
      } catch (const Error& e) {
        const std::lock_guard lock(mutex);
        if (!rank_error) rank_error = e.what();
        throw;
      }
    });
  } catch (const Error&) {
    if (rank_error) throw InvalidArgument(*rank_error);
    throw;
  }
  if (ranks_run == 0) return;  // another process of the job reports
  out << "imported " << echo_input(file.string(), 200) << " as a checkpoint of step 0 in "
      << echo_input(folder, 200) << " (" << total << " bytes, " << specs.size()
      << " parameters, without optimizer state, " << ranks_run << " rank"
      << (ranks_run == 1 ? "" : "s") << "); train --resume " << echo_input(folder, 200)
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
                const std::optional<std::string>& seq_text, bool json, std::ostream& out) {
  const models::ModelSource source = models::open_model_source(path, "path");
  show_notes("ckpt", source.notes);
  // The values, their gradients and the buffers of one window.
  check_model_fits(*source.model, 3, "computing the loss of " + source.words);
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
    train::DistributedModel model(source.model, 0);
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
  train::DistributedModel model(source.model, 0);
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
      export_hf(path_, format_, out_, force_, out);
    } else if (loss_->parsed()) {
      model_loss(path_, data_, data_format_, loss_->get_option("--data-format")->count() > 0,
                 tokenizer_, seq_, json_, out);
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

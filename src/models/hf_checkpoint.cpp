#include "shardwise/models/hf_checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>

#include "../detail/output_file.hpp"
#include "../detail/text_format.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_folders.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/ckpt/checkpoint_save.hpp"
#include "shardwise/ckpt/safetensors_file.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/safetensors.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/models/hf_weights.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/models/model_resolution.hpp"
#include "shardwise/models/model_source.hpp"
#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/rank_runner.hpp"
#include "shardwise/train/training_state.hpp"

namespace shardwise::models {
namespace {

using shardwise::detail::IfExists;
using shardwise::detail::PathKind;

// The metadata an export writes beside safetensors' "format", so that a forced export can tell
// an earlier export from a folder transformers or the Hub made.
constexpr char kExportMark[] = "shardwise";
constexpr char kExportMarkValue[] = "ckpt export";

// Whether `file` is a model.safetensors an export wrote (its header's metadata says so); false
// for anything else, a file that cannot be read among them.
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

}  // namespace

const HfAdapter& hf_adapter_named(const std::string& format, const std::string& setting) {
  std::string formats;
  for (const ModelFamily& family : model_families()) {
    if (!family.hugging_face) continue;
    if (family.hugging_face->format() == format) return *family.hugging_face;
    formats += (formats.empty() ? "" : ", ") + family.hugging_face->format();
  }
  throw InvalidArgument(setting + " is '" + echo_input(format) + "'; expected " + formats);
}

void check_model_fits(const train::ModelDefinition& model, double copies, const std::string& what) {
  double elements = 0;
  for (const train::ParameterSpec& spec : model.parameters()) {
    double n = 1;
    for (const std::int64_t size : spec.shape) n *= static_cast<double>(size);
    elements += n;
  }
  const double bytes = elements * sizeof(train::ParameterStore::Element) * copies;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const double memory = static_cast<double>(pages) * static_cast<double>(page);
  if (bytes > memory / 2) {
    throw InvalidArgument(what + " needs about " +
                          shardwise::detail::with_thousands(
                              bytes > 9e18 ? INT64_MAX : static_cast<std::int64_t>(bytes)) +
                          " bytes of buffers; this machine has " +
                          shardwise::detail::with_thousands(static_cast<std::int64_t>(memory)) +
                          " bytes of memory, and a run may use half");
  }
}

namespace {

// The elements of `box` of a row-major array of `shape`, row-major.
std::vector<float> values_in(const std::vector<float>& whole, const Shape& shape,
                             const ShardIndex& box) {
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(num_elements(shape_of(box))));
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> at(rank);
  for (std::size_t d = 0; d < rank; ++d) at[d] = box[d].start;
  const std::int64_t run = box[rank - 1].size();
  while (true) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset = offset * shape[d] + at[d];
    out.insert(out.end(), whole.begin() + offset, whole.begin() + offset + run);
    std::size_t d = rank - 1;
    while (d-- > 0) {
      if (++at[d] < box[d].stop) break;
      at[d] = box[d].start;
    }
    if (d == static_cast<std::size_t>(-1)) return out;
  }
}

}  // namespace

HfExportResult export_to_hf(const HfExportSettings& settings) {
  const train::SettingNames& named = settings.names;
  const std::string out_name = named("out");
  const std::string force_hint = "; " + named("force") + " replaces it";
  const HfAdapter& adapter = hf_adapter_named(settings.format, named("format"));
  if (settings.dtype != DType::kF32 && settings.dtype != DType::kBF16) {
    throw InvalidArgument(named("dtype") + " is " + to_string(settings.dtype) +
                          "; an export writes float32 or bfloat16");
  }
  const bool in_bf16 = settings.dtype == DType::kBF16;
  const std::string& folder = settings.out;
  if (folder.empty()) throw InvalidArgument(out_name + " is an empty path");
  // What is in the way is found before anything is read: a user's Hugging Face folder keeps
  // its files unless forced, and a symlink, FIFO or folder in a file's place is never written.
  const IfExists policy = settings.force ? IfExists::kReplaceFile : IfExists::kRefuse;
  const std::filesystem::path out_folder = folder;
  const PathKind kind = shardwise::detail::path_kind(out_folder);
  if (kind != PathKind::kAbsent) {
    if (kind != PathKind::kFolder && !std::filesystem::is_directory(folder)) {
      throw InvalidArgument(out_name + " '" + echo_input(folder, 200) + "' is " +
                            shardwise::detail::path_kind_words(kind) + ", not a folder");
    }
    for (const char* name : {"model.safetensors", "config.json"}) {
      shardwise::detail::check_output_path(out_folder / name, policy, out_name, force_hint);
    }
    // Force replaces an earlier export, never the files of a folder transformers or the Hub
    // made (a model.safetensors without the export's mark, or a config.json without one).
    const std::filesystem::path weights = out_folder / "model.safetensors";
    const bool has_weights = shardwise::detail::path_kind(weights) != PathKind::kAbsent;
    const bool has_config =
        shardwise::detail::path_kind(out_folder / "config.json") != PathKind::kAbsent;
    if (settings.force && (has_weights || has_config) && !exported_by_shardwise(weights)) {
      throw InvalidArgument(out_name + " '" + echo_input(folder, 200) + "' holds " +
                            (has_weights ? "a model.safetensors" : "a config.json") +
                            " that ckpt export did not write (a Hugging Face folder's own); it is "
                            "left as it is (" +
                            named("force") + " replaces only an earlier export)");
    }
  }
  const ckpt::CheckpointReader reader(ckpt::resolve_checkpoint(settings.checkpoint, "checkpoint"));
  const std::string what = "checkpoint '" + echo_input(reader.folder().string(), 200) + "'";
  const CheckpointInfo info = checkpoint_info(reader.index(), what);
  // Optimizer state stays behind: the export is the model.
  if (adapter.format() != hf_adapter_of(*info.model).format()) {
    throw InvalidArgument(named("format") + " " + settings.format +
                          " holds another family's models; " + what + " holds " +
                          info.model->describe());
  }
  require_model_arrays(reader.index(), *info.model, what);
  reader.check_files();
  // The trainer's values and their Hugging Face layout, both whole.
  check_model_fits(*info.model, 2, "exporting " + what);
  using Element = train::ParameterStore::Element;
  std::vector<std::vector<float>> values;
  std::vector<std::vector<BFloat16>> rounded;  // in bf16: each tensor's rounding, in its place
  std::vector<ckpt::SafetensorsEntry> entries;
  for (const train::ParameterSpec& spec : info.model->parameters()) {
    std::vector<Element> whole(static_cast<std::size_t>(num_elements(spec.shape)));
    const ShardIndex box = whole_box(spec.shape);
    const ckpt::BlockToLoad target{train::model_array(spec.name), spec.shape,
                                   train::ParameterStore::kElementType, box,
                                   std::as_writable_bytes(std::span<Element>(whole))};
    (void)reader.read({&target, 1});
    if (std::string bad = train::non_finite_value(whole, target.array, box, what); !bad.empty()) {
      throw ckpt::CheckpointError(bad);
    }
    const std::vector<HfPiece> pieces = adapter.hf_export_pieces(spec.name, spec.shape);
    for (const HfPiece& piece : pieces) {
      values.push_back(holds_whole(pieces, spec.shape) ? adapter.to_hf(spec.name, spec.shape, whole)
                                                       : values_in(whole, spec.shape, piece.box));
      if (in_bf16) {
        rounded.emplace_back(values.back().size());
        kernels::to_bf16(values.back(), rounded.back());
        values.back() = {};
        entries.push_back({piece.tensor, element_type(rounded.back().data()), piece.shape,
                           std::as_bytes(std::span<const BFloat16>(rounded.back()))});
        continue;
      }
      entries.push_back({piece.tensor, element_type(values.back().data()), piece.shape,
                         std::as_bytes(std::span<const float>(values.back()))});
    }
  }
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    throw ckpt::CheckpointError("cannot make the folder '" + echo_input(folder, 200) +
                                "': " + error.message());
  }
  ckpt::write_safetensors_file(out_folder / "model.safetensors", entries,
                               {{"format", "pt"}, {kExportMark, kExportMarkValue}},
                               {settings.force, out_name, force_hint});
  std::string config = adapter.hf_config_json(*info.model);
  if (in_bf16) {
    // transformers loads the weights in the type they were saved in (torch_dtype="auto").
    nlohmann::ordered_json json = nlohmann::ordered_json::parse(config);
    json["torch_dtype"] = "bfloat16";
    config = json.dump(2) + "\n";
  }
  shardwise::detail::write_whole_file(out_folder / "config.json", config, policy, out_name,
                                      force_hint);
  return {info.step, reader.folder(), entries.size(), adapter.words()};
}

HfImport::HfImport(HfImportSettings settings) : settings_(std::move(settings)) {
  const train::SettingNames& named = settings_.names;
  adapter_ = &hf_adapter_named(settings_.format, named("format"));
  const std::string& folder = settings_.out;
  if (folder.empty()) throw InvalidArgument(named("out") + " is an empty path");
  if (settings_.ranks && (*settings_.ranks < 1 || *settings_.ranks > 4096)) {
    throw InvalidArgument(named("ranks") + " is " + std::to_string(*settings_.ranks) +
                          "; expected 1 to 4096");
  }
  if (settings_.model) {
    model_ = model_definition(*settings_.model, named("model"));
    if (hf_adapter_of(*model_).format() != adapter_->format()) {
      throw InvalidArgument(named("model") + " " + echo_input(*settings_.model) + " is " +
                            model_->describe() + ", not a model " + named("format") + " " +
                            settings_.format + " holds");
    }
  }
  file_ = hf_weights_file(settings_.weights);
  if (!model_) model_ = HfWeights::folder_model(file_, *adapter_, notes_);
  // Every rank's blocks together hold the model once, and each its head's rows beside them:
  // checked on the config's sizes alone, before the file is opened.
  check_model_fits(*model_, 2, "importing '" + echo_input(file_.string(), 200) + "'");
  // Only an earlier import is ever replaced (when forced), by a save under its run id.
  if (shardwise::detail::path_kind(folder) != PathKind::kAbsent) {
    std::optional<ckpt::CheckpointIndex> existing;
    try {
      existing = ckpt::CheckpointReader(folder).index();
    } catch (const Error&) {  // not a checkpoint: refused below
    }
    const bool an_import = existing && !existing->run_id.empty() &&
                           nlohmann::json::parse(existing->metadata_json).contains("imported_from");
    if (!settings_.force || !an_import) {
      throw InvalidArgument(
          named("out") + " '" + echo_input(folder, 200) + "' exists" +
          (an_import
               ? " (an earlier import); it is left as it is; " + named("force") + " replaces it"
               : "; it is left as it is (" + named("force") + " replaces only an earlier import)"));
    }
    run_id_ = existing->run_id;
  }
  (void)HfWeights(file_, *adapter_, model_);  // the file checked whole, once
}

std::optional<HfImportResult> HfImport::run(const BackendInfo& backend) const {
  const train::SettingNames& named = settings_.names;
  const std::vector<train::ParameterSpec> specs = model_->parameters();
  std::mutex mutex;
  std::optional<HfImportResult> result;
  train::run_on_ranks(backend, settings_.ranks.value_or(1), [&](Communicator& comm) {
    if (backend.rank_per_process && settings_.ranks && *settings_.ranks != comm.size()) {
      throw InvalidArgument(named("ranks") + " is " + std::to_string(*settings_.ranks) +
                            ", but the job has " + std::to_string(comm.size()) +
                            " processes (one rank each); give " + named("ranks") + " " +
                            std::to_string(comm.size()) + " or leave it out");
    }
    std::string error_text;
    using Element = train::ParameterStore::Element;
    std::vector<std::vector<Element>> blocks;
    std::vector<ckpt::BlockToSave> saved;
    try {
      const HfWeights weights(file_, *adapter_, model_);
      for (const train::ParameterSpec& spec : specs) {
        const ShardIndex box = import_box(spec.shape, comm.rank(), comm.size());
        if (box.empty() || is_empty(box)) continue;
        blocks.emplace_back(static_cast<std::size_t>(num_elements(shape_of(box))));
        weights.read(spec.name, box, blocks.back().data());
        saved.push_back({train::model_array(spec.name), spec.shape,
                         train::ParameterStore::kElementType,
                         "dimension 0 in " + std::to_string(comm.size()) + " parts (import)", box,
                         std::as_bytes(std::span<const Element>(blocks.back()))});
      }
    } catch (const Error& e) {
      error_text = e.what();
    }
    ckpt::throw_unless_all_succeeded(comm, error_text, "not imported");
    nlohmann::json metadata =
        nlohmann::json::parse(train::checkpoint_metadata(model_->config_json(), 0, ""));
    metadata["imported_from"] = utf8_text(file_.string());
    ckpt::SaveOptions options;
    options.run_id = run_id_;
    const ckpt::SaveStats stats =
        ckpt::save_checkpoint(comm, settings_.out, saved, metadata.dump(), options);
    if (comm.rank() == 0) {
      const std::lock_guard lock(mutex);
      result = HfImportResult{file_, stats.bytes_total, specs.size(), comm.size()};
    }
  });
  return result;
}

}  // namespace shardwise::models

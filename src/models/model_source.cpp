#include "shardwise/models/model_source.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>

#include <algorithm>
#include <cstdio>

#include "../detail/crc32c.hpp"
#include "../detail/file_io.hpp"
#include "../detail/json_reader.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_folders.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/hf_weights.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/train/training_state.hpp"

namespace shardwise::models {
namespace {

// A file's eos_token_id: an id or a list of them; none where it is absent or null.
std::optional<std::vector<std::int64_t>> end_tokens(const nlohmann::json& file,
                                                    const std::string& what) {
  const auto found = file.find("eos_token_id");
  if (found == file.end() || found->is_null()) return std::nullopt;
  const nlohmann::json ids = found->is_array() ? *found : nlohmann::json::array({*found});
  std::vector<std::int64_t> tokens;
  for (const nlohmann::json& id : ids) {
    if (!id.is_number_integer()) {
      throw InvalidArgument(what + ": \"eos_token_id\" holds " + echo_input(id.dump(), 80) +
                            ", not a token id");
    }
    tokens.push_back(id.get<std::int64_t>());
  }
  return tokens;
}

// What generation stops on, as transformers' generate() does: generation_config.json's
// eos_token_id where the folder has one that says it, else config.json's; into `source`'s
// end_tokens, with the file they came from.
void read_end_tokens(const std::filesystem::path& folder, const std::string& config,
                     const std::string& field, ModelSource& source) {
  const std::filesystem::path file = folder / "generation_config.json";
  if (shardwise::detail::path_kind(file) != shardwise::detail::PathKind::kAbsent) {
    const std::string what = "'" + echo_input(file.string(), 200) + "'";
    const nlohmann::json generation = shardwise::detail::parse_json(
        shardwise::detail::read_file(file.string(), field), field + " " + what);
    if (!generation.is_object()) {
      throw InvalidArgument(field + " " + what + " holds " + echo_input(generation.dump(), 60) +
                            ", not a JSON object of generation settings");
    }
    if (auto tokens = end_tokens(generation, field + " " + what)) {
      source.end_tokens = std::move(*tokens);
      source.end_tokens_from = what;
      return;
    }
  }
  const std::string what = "'" + echo_input((folder / "config.json").string(), 200) + "'";
  if (auto tokens = end_tokens(nlohmann::json::parse(config), field + " " + what)) {
    source.end_tokens = std::move(*tokens);
    source.end_tokens_from = what;
  }
}

// The weights and configuration of a Hugging Face folder as a short text, the same on every host
// that sees the same files and different for other weights of the same shapes: each
// .safetensors and .json file's name, size and CRC-32C of 16 blocks of 4 KiB spread over it
// (read through the links of Hugging Face's cache), so that a file of any size costs 64 KiB.
std::string folder_identity(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if ((name.ends_with(".safetensors") || name.ends_with(".json")) &&
        std::filesystem::is_regular_file(entry.path(), error)) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::uint32_t crc = 0;
  std::vector<char> block(4096);
  for (const std::filesystem::path& file : files) {
    const std::string name = file.filename().string();
    crc = shardwise::detail::crc32c(name.data(), name.size(), crc);
    try {
      const shardwise::detail::File in(file, O_RDONLY);
      const std::uint64_t size = in.size();
      crc = shardwise::detail::crc32c(&size, sizeof size, crc);
      constexpr std::uint64_t kBlocks = 16;
      for (std::uint64_t b = 0; b < kBlocks && size > 0; ++b) {
        const std::uint64_t length = std::min<std::uint64_t>(block.size(), size);
        const std::uint64_t at = size <= length ? 0 : (size - length) / (kBlocks - 1) * b;
        in.read_at(block.data(), static_cast<std::size_t>(length), at);
        crc = shardwise::detail::crc32c(block.data(), static_cast<std::size_t>(length), crc);
        if (size <= length) break;
      }
    } catch (const Error&) {
      // A file that cannot be read is found, and named, where the weights are read.
    }
  }
  char text[16];
  std::snprintf(text, sizeof text, "%08x", crc);
  return std::to_string(files.size()) + " files, CRC-32C " + text;
}

ModelSource hugging_face_source(const std::filesystem::path& folder, const std::string& field) {
  const std::filesystem::path file = folder / "config.json";
  const std::string what = field + " '" + echo_input(file.string(), 200) + "'";
  const std::string config = shardwise::detail::read_file(file.string(), field);
  ModelSource source;
  source.model = read_hf_config(config, what, source.notes);
  read_end_tokens(folder, config, field, source);
  source.words = "Hugging Face folder '" + echo_input(folder.string(), 200) + "'";
  source.identity = folder_identity(folder);
  source.values = hf_initial_values(folder.string(), source.model);
  std::error_code error;
  if (std::filesystem::is_regular_file(folder / "tokenizer.json", error)) {
    source.tokenizer = folder / "tokenizer.json";
  }
  return source;
}

ModelSource checkpoint_source(const std::filesystem::path& path, const std::string& field) {
  auto reader =
      std::make_shared<const ckpt::CheckpointReader>(ckpt::resolve_checkpoint(path, field));
  const std::string what = "checkpoint '" + echo_input(reader->folder().string(), 200) + "'";
  CheckpointInfo info = checkpoint_info(reader->index(), what);
  require_model_arrays(reader->index(), *info.model, what);
  reader->check_files();
  ModelSource source;
  source.words = what;
  char checksum[16];
  std::snprintf(checksum, sizeof checksum, "%08x", reader->index_checksum());
  source.identity = "index.json CRC-32C " + std::string(checksum);
  source.step = info.step;
  source.model = std::move(info.model);
  source.values = [reader, what](std::span<const train::ParameterBlock> blocks) {
    std::vector<ckpt::BlockToLoad> targets;
    for (const train::ParameterBlock& block : blocks) {
      targets.push_back({train::model_array(block.name), block.shape, DType::kF32, block.box,
                         std::as_writable_bytes(block.values)});
    }
    (void)reader->read(targets);
    for (const train::ParameterBlock& block : blocks) {
      const std::string bad =
          train::non_finite_value(block.values, train::model_array(block.name), block.box, what);
      if (!bad.empty()) throw ckpt::CheckpointError(bad);
    }
  };
  return source;
}

}  // namespace

CheckpointInfo checkpoint_info(const ckpt::CheckpointIndex& index, const std::string& what) {
  const nlohmann::json metadata = nlohmann::json::parse(index.metadata_json);
  CheckpointInfo info;
  info.step = train::checkpoint_step(index, what);
  const auto model = metadata.find("model");
  if (model == metadata.end() || !model->is_object()) {
    throw ckpt::CheckpointError(what + ": metadata \"model\" is missing");
  }
  try {
    info.model = model_from_config(model->dump(), what + ": metadata model");
  } catch (const InvalidArgument& e) {
    throw ckpt::CheckpointError(e.what());
  }
  for (const ckpt::ArrayRecord& array : index.arrays) {
    info.has_optimizer = info.has_optimizer || array.name.rfind("optimizer/", 0) == 0;
  }
  return info;
}

void require_model_arrays(const ckpt::CheckpointIndex& index, const train::ModelDefinition& model,
                          const std::string& what) {
  for (const std::string& name : train::checkpoint_arrays(model.parameters(), false)) {
    if (index.find(name) == nullptr) {
      throw ckpt::CheckpointError(what + " lacks the array '" + name + "'");
    }
  }
  train::require_checkpoint_shapes(index, model.parameters(), false, what);
  // An expert bias chooses the tokens' experts: the parameters alone would route them otherwise.
  for (const ckpt::ArrayRecord& array : index.arrays) {
    if (array.name.rfind(train::kExpertBiasArrays, 0) == 0) {
      throw ckpt::CheckpointError(
          what + " holds an expert bias ('" + array.name +
          "'), which chooses the tokens' experts; only a training run resumed from it (with an "
          "expert bias rate) reads it, and a Hugging Face Mixtral or Qwen3-MoE has none");
    }
  }
}

ModelSource open_model_source(const std::string& path, const std::string& field) {
  if (path.empty()) throw InvalidArgument(field + " is an empty path");
  const std::filesystem::path given = path;
  std::error_code error;
  if (!std::filesystem::exists(given, error)) {
    throw InvalidArgument(field + " '" + echo_input(path, 200) + "' does not exist");
  }
  if (!std::filesystem::is_directory(given, error)) {
    throw InvalidArgument(field + " '" + echo_input(path, 200) +
                          "' is a file; give a checkpoint, a save folder or a Hugging Face "
                          "folder (config.json and model.safetensors)");
  }
  // A checkpoint holds index.json; a Hugging Face folder config.json; a --save folder neither.
  if (!std::filesystem::exists(given / "index.json", error) &&
      std::filesystem::exists(given / "config.json", error)) {
    return hugging_face_source(given, field);
  }
  return checkpoint_source(given, field);
}

void load_whole(const ModelSource& source, train::ParameterStore& store) {
  std::vector<train::ParameterBlock> blocks;
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    const train::ParameterSpec& spec = store.specs()[p];
    ShardIndex box;
    for (const std::int64_t size : spec.shape) box.push_back({0, size});
    blocks.push_back(
        {spec.name, spec.shape, box, std::span<float>(store.value(p), store.count(p))});
  }
  source.values(blocks);
  store.mark_values_changed();
}

}  // namespace shardwise::models

#include "shardwise/models/hf_weights.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "../detail/file_io.hpp"
#include "../detail/json_reader.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/model_registry.hpp"

namespace shardwise::models {

std::filesystem::path hf_weights_file(const std::string& path) {
  std::filesystem::path file = path;
  std::error_code error;
  if (!std::filesystem::is_directory(file, error)) return file;
  file /= "model.safetensors";
  if (shardwise::detail::path_kind(file) != shardwise::detail::PathKind::kAbsent) return file;
  file.replace_filename("model.safetensors.index.json");
  if (shardwise::detail::path_kind(file) != shardwise::detail::PathKind::kAbsent) return file;
  const std::string named = "'" + echo_input(path, 200) + "'";
  const std::string supported =
      "; shardwise reads model.safetensors, or model.safetensors.index.json and its parts (with "
      "config.json beside them)";
  for (const char* other :
       {"pytorch_model.bin", "model.bin", "tf_model.h5", "flax_model.msgpack"}) {
    if (std::filesystem::exists(std::filesystem::path(path) / other)) {
      throw InvalidArgument(named + " holds " + other + ", not model.safetensors" + supported +
                            ": save it with save_pretrained(..., safe_serialization=True)");
    }
  }
  throw InvalidArgument(named + " holds no model.safetensors" + supported);
}

const HfAdapter& hf_adapter_of(const train::ModelDefinition& model) {
  const ModelFamily& family = model_family(model.family(), "the model");
  if (!family.hugging_face) {
    throw InvalidArgument("the model family '" + family.name + "' has no Hugging Face format");
  }
  return *family.hugging_face;
}

std::shared_ptr<const train::ModelDefinition> HfWeights::folder_model(
    const std::filesystem::path& file, const HfAdapter& adapter, std::vector<std::string>& notes) {
  const std::filesystem::path config =
      (file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path()) /
      "config.json";
  return adapter.model_from_hf_config(shardwise::detail::read_file(config.string(), "config.json"),
                                      "'" + echo_input(config.string(), 200) + "'", notes);
}

std::shared_ptr<const train::ModelDefinition> HfWeights::folder_model(
    const std::filesystem::path& file, const HfAdapter& adapter) {
  std::vector<std::string> notes;
  return folder_model(file, adapter, notes);
}

namespace {

constexpr std::size_t kMaxParts = 100000;

// A weights file, read through a link where it is one: Hugging Face's cache keeps a snapshot's
// files as links into ../../blobs/. (A checkpoint's own files are never read through a link:
// ckpt::CheckpointReader refuses them; this reads the file the link leads to as the file.)
ckpt::CheckpointReader open_weights(const std::filesystem::path& file) {
  if (shardwise::detail::path_kind(file) != shardwise::detail::PathKind::kSymlink) {
    return ckpt::CheckpointReader::from_safetensors(file);
  }
  const std::string named = "'" + echo_input(file.string(), 200) + "'";
  std::error_code error;
  const std::filesystem::path target = std::filesystem::canonical(file, error);
  if (error) {
    throw InvalidArgument(named + " is a link that leads to no file (" + error.message() + ")");
  }
  try {
    return ckpt::CheckpointReader::from_safetensors(target);
  } catch (const ckpt::CheckpointError& e) {
    throw ckpt::CheckpointError(named + ", a link to '" + echo_input(target.string(), 200) +
                                "': " + e.what());
  }
}

// The parts a model.safetensors.index.json names (its "weight_map": tensor to file), each a file
// name in the index's folder; InvalidArgument naming what is wrong.
std::vector<std::pair<std::string, std::string>> weight_map(const std::filesystem::path& index) {
  const std::string what = "'" + echo_input(index.string(), 200) + "'";
  const nlohmann::json json = shardwise::detail::parse_json(
      shardwise::detail::read_file(index.string(), "the weights index"), what);
  const auto map = json.is_object() ? json.find("weight_map") : json.end();
  if (!json.is_object() || map == json.end() || !map->is_object() || map->empty()) {
    throw InvalidArgument(what + " has no \"weight_map\" object of tensors and their files");
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [tensor, part] : map->items()) {
    if (!part.is_string()) {
      throw InvalidArgument(what + ": the file of tensor '" + echo_input(tensor, 200) + "' is " +
                            echo_input(part.dump(), 60) + ", not a file name");
    }
    const std::string name = part.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
        !name.ends_with(".safetensors")) {
      throw InvalidArgument(what + ": tensor '" + echo_input(tensor, 200) + "' is in '" +
                            echo_input(name, 200) +
                            "'; a part is a .safetensors file beside the index");
    }
    entries.emplace_back(tensor, name);
  }
  return entries;
}

}  // namespace

HfWeights::HfWeights(std::filesystem::path file, const HfAdapter& adapter,
                     std::shared_ptr<const train::ModelDefinition> model)
    : file_(std::move(file)),
      adapter_(adapter),
      model_(std::move(model)),
      specs_(model_->parameters()) {
  if (file_.filename() != "model.safetensors.index.json") {
    readers_.push_back(open_weights(file_));
  } else {
    // A sharded model: every part opened, their tensors one index, each tensor in the part the
    // index says and in no other.
    const std::vector<std::pair<std::string, std::string>> entries = weight_map(file_);
    std::map<std::string, std::size_t> part_index;  // each part's reader, in the index's order
    std::vector<std::string> parts;
    for (const auto& [tensor, part] : entries) {
      if (part_index.emplace(part, parts.size()).second) parts.push_back(part);
    }
    if (parts.size() > kMaxParts) {
      throw InvalidArgument("'" + echo_input(file_.string(), 200) + "' names " +
                            std::to_string(parts.size()) + " parts; at most " +
                            std::to_string(kMaxParts) + " are read");
    }
    for (const std::string& part : parts) {
      readers_.push_back(open_weights(file_.parent_path() / part));
    }
    for (const auto& [tensor, part] : entries) {
      if (readers_[part_index.at(part)].index().find(tensor) == nullptr) {
        throw ckpt::CheckpointError("'" + echo_input(file_.string(), 200) + "' puts tensor '" +
                                    echo_input(tensor, 200) + "' in " + part +
                                    ", which does not hold it");
      }
    }
  }
  for (std::size_t r = 0; r < readers_.size(); ++r) {
    for (const ckpt::ArrayRecord& array : readers_[r].index().arrays) {
      if (!part_of_.emplace(array.name, r).second) {
        throw ckpt::CheckpointError("the parts of '" + echo_input(file_.string(), 200) +
                                    "' hold tensor '" + echo_input(array.name, 200) + "' twice");
      }
      index_.arrays.push_back(array);
    }
  }
  std::sort(index_.arrays.begin(), index_.arrays.end(),
            [](const ckpt::ArrayRecord& a, const ckpt::ArrayRecord& b) { return a.name < b.name; });
  // The file's copies of a parameter the model ties (a tensor that is itself a parameter, as an
  // untied model's head, is no copy).
  for (const auto& pair : adapter_.tied_tensors()) {
    if (std::none_of(specs_.begin(), specs_.end(),
                     [&](const train::ParameterSpec& spec) { return spec.name == pair.first; })) {
      tied_.push_back(pair);
    }
  }
  const ckpt::CheckpointIndex& index = index_;
  std::set<std::string> held;  // every tensor some parameter reads
  for (const train::ParameterSpec& spec : specs_) {
    pieces_.push_back(adapter_.hf_pieces(index, spec.name, spec.shape));
    // An adapter's pieces tile the parameter: a block left out would be read as nothing.
    std::int64_t covered = 0;
    for (const HfPiece& piece : pieces_.back()) covered += num_elements(shape_of(piece.box));
    if (covered != num_elements(spec.shape)) {
      throw std::logic_error("the " + adapter_.format() + " adapter's tensors of '" + spec.name +
                             "' hold " + std::to_string(covered) + " of its " +
                             std::to_string(num_elements(spec.shape)) + " elements");
    }
    for (const HfPiece& piece : pieces_.back()) {
      if (holds_whole(pieces_.back(), spec.shape)) {
        adapter_.check_tensor(reader_of(piece.tensor), piece.tensor, spec.name, spec.shape);
      } else {
        adapter_.check_tensor(reader_of(piece.tensor), piece.tensor,
                              spec.name + to_string(piece.box), piece.shape);
      }
      held.insert(piece.tensor);
    }
  }
  for (const ckpt::ArrayRecord& array : index.arrays) {
    const bool tied_copy = std::any_of(tied_.begin(), tied_.end(),
                                       [&](const auto& pair) { return pair.first == array.name; });
    if (held.count(array.name) == 0 && !adapter_.ignored_tensor(array.name) && !tied_copy) {
      throw ckpt::CheckpointError("the file's tensor '" + echo_input(array.name, 200) +
                                  "' is no parameter of " + model_->describe());
    }
  }
  for (const auto& [tensor, parameter] : tied_) {
    if (index.find(tensor) == nullptr) continue;
    for (const train::ParameterSpec& spec : specs_) {
      if (spec.name == parameter) {
        adapter_.check_tensor(reader_of(tensor), tensor, spec.name, spec.shape);
      }
    }
  }
}

void HfWeights::read(const std::string& name, const ShardIndex& box, float* out) const {
  const auto it = std::find_if(specs_.begin(), specs_.end(),
                               [&](const train::ParameterSpec& spec) { return spec.name == name; });
  if (it == specs_.end()) {
    throw InvalidArgument("'" + echo_input(name, 200) + "' is no parameter of " +
                          model_->describe());
  }
  const train::ParameterSpec& spec = *it;
  const std::vector<HfPiece>& pieces = pieces_[static_cast<std::size_t>(it - specs_.begin())];
  const std::string& tensor = pieces.front().tensor;
  const auto count = static_cast<std::size_t>(num_elements(shape_of(box)));
  if (holds_whole(pieces, spec.shape)) {
    adapter_.read_block(reader_of(tensor), tensor, spec.name, spec.shape, box, out);
  } else {
    read_pieces(pieces, spec.name, box, out);
  }
  if (std::string bad = train::non_finite_value({out, count}, tensor, box,
                                                "'" + echo_input(file_.string(), 200) + "'");
      !bad.empty()) {
    throw ckpt::CheckpointError(bad);
  }
  for (const auto& [copy_name, parameter] : tied_) {
    if (spec.name != parameter || index_.find(copy_name) == nullptr) continue;
    // A tied copy that differs would be dropped in silence: refused instead.
    std::vector<float> copy(count);
    adapter_.read_block(reader_of(copy_name), copy_name, spec.name, spec.shape, box, copy.data());
    if (!std::equal(copy.begin(), copy.end(), out)) {
      throw ckpt::CheckpointError("the file's " + copy_name + " differs from its " + parameter +
                                  "; the model ties them");
    }
  }
}

void HfWeights::read_pieces(const std::vector<HfPiece>& pieces, const std::string& name,
                            const ShardIndex& box, float* out) const {
  const std::size_t rank = box.size();
  for (const HfPiece& piece : pieces) {
    // The part of the box this piece holds, in the parameter's coordinates and the tensor's.
    ShardIndex part(rank), in_tensor;
    bool empty = false;
    for (std::size_t d = 0; d < rank; ++d) {
      part[d] = {std::max(box[d].start, piece.box[d].start),
                 std::min(box[d].stop, piece.box[d].stop)};
      empty = empty || part[d].empty();
    }
    if (empty) continue;
    for (std::size_t d = rank - piece.shape.size(); d < rank; ++d) {
      in_tensor.push_back({part[d].start - piece.box[d].start, part[d].stop - piece.box[d].start});
    }
    std::vector<float> values(static_cast<std::size_t>(num_elements(shape_of(part))));
    adapter_.read_block(reader_of(piece.tensor), piece.tensor, name + to_string(piece.box),
                        piece.shape, in_tensor, values.data());
    // Each run along the last dimension to its place in the box's row-major order.
    const std::int64_t run = part[rank - 1].size();
    std::vector<std::int64_t> at(rank);
    for (std::size_t d = 0; d < rank; ++d) at[d] = part[d].start;
    for (std::size_t from = 0; from < values.size(); from += static_cast<std::size_t>(run)) {
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < rank; ++d) {
        offset = offset * box[d].size() + (at[d] - box[d].start);
      }
      std::copy(values.begin() + static_cast<std::ptrdiff_t>(from),
                values.begin() + static_cast<std::ptrdiff_t>(from) + run, out + offset);
      for (std::size_t d = rank - 1; d-- > 0;) {
        if (++at[d] < part[d].stop) break;
        at[d] = part[d].start;
      }
    }
  }
}

const ckpt::CheckpointReader& HfWeights::reader_of(const std::string& tensor) const {
  const auto it = part_of_.find(tensor);
  if (it == part_of_.end()) throw ckpt::CheckpointError("the file has no tensor '" + tensor + "'");
  return readers_[it->second];
}

train::InitialValues hf_initial_values(const std::string& path,
                                       std::shared_ptr<const train::ModelDefinition> model) {
  const HfAdapter& adapter = hf_adapter_of(*model);
  const std::filesystem::path file = hf_weights_file(path);
  (void)HfWeights(file, adapter, model);  // refused here, before any rank starts
  return [file, &adapter, model](std::span<const train::ParameterBlock> blocks) {
    const HfWeights weights(file, adapter, model);
    for (const train::ParameterBlock& block : blocks) {
      weights.read(block.name, block.box, block.values.data());
    }
  };
}

}  // namespace shardwise::models

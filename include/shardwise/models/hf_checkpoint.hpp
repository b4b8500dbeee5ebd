#pragma once
// Checkpoints to and from Hugging Face, as library calls: a checkpoint's model written as one
// model.safetensors and config.json that transformers loads, and a Hugging Face model's weights
// saved as a sharded checkpoint of step 0 that a run resumes on any layout. `shardwise ckpt
// export|import` read their flags into these settings and print the results. Messages name the
// settings as SettingNames maps them ("out", "force", "format", "model", "ranks").

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/comm/backend_registry.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/models/hf_adapter.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/setting_names.hpp"

namespace shardwise::models {

// The registered family's adapter whose format() is `format` ("hf-gpt2", "hf-llama", ...);
// InvalidArgument naming `setting` and the formats there are otherwise.
[[nodiscard]] const HfAdapter& hf_adapter_named(const std::string& format,
                                                const std::string& setting);

// InvalidArgument naming `what` where `copies` float32 copies of the model's parameters would
// need more than half this machine's memory: checked before any is allocated.
void check_model_fits(const train::ModelDefinition& model, double copies, const std::string& what);

struct HfExportSettings {
  std::string checkpoint;  // a checkpoint, or a save folder (its newest)
  std::string format;      // the adapter's format: "hf-gpt2", "hf-llama", ...
  std::string out;         // the folder to write model.safetensors and config.json into
  // Replace the files of an earlier export (never a folder's that the export did not write).
  bool force = false;
  // What the weights are written in: float32 (the masters as they are) or bf16 (rounded to
  // nearest, ties to even; config.json's torch_dtype says bfloat16).
  DType dtype = DType::kF32;
  train::SettingNames names = {};
};

struct HfExportResult {
  std::int64_t step = 0;
  std::filesystem::path checkpoint;  // the checkpoint folder read
  std::size_t tensors = 0;
  std::string layout;  // the adapter's words for the layout written
};

// Everything refused before a byte is written: the output's place (a file that is not an earlier
// export is never replaced), the checkpoint's family against the format, the memory.
HfExportResult export_to_hf(const HfExportSettings& settings);

struct HfImportSettings {
  std::string weights;  // a model.safetensors, or a Hugging Face folder holding one
  std::string format;
  // The model the weights are (a preset or a model file); absent: the folder's config.json.
  std::optional<std::string> model;
  std::string out;     // the checkpoint folder to write
  bool force = false;  // replace an earlier import (never another folder)
  // Ranks that read and write (threads; under a launcher its processes, which this must equal).
  std::optional<int> ranks;
  train::SettingNames names;
};

struct HfImportResult {
  std::filesystem::path file;  // the weights file read
  std::uint64_t bytes = 0;
  std::size_t parameters = 0;
  int ranks = 0;
};

class HfImport {
 public:
  // Finds everything a rank would find wrong, once, before any rank starts or any parameter is
  // allocated: the output's place (only an earlier import is replaced, with force), the model,
  // the file's tensors and their shapes, memory. InvalidArgument naming the setting otherwise.
  explicit HfImport(HfImportSettings settings);

  [[nodiscard]] const std::shared_ptr<const train::ModelDefinition>& model() const {
    return model_;
  }
  // What the model's reader took without knowing it (fields a newer transformers writes).
  [[nodiscard]] const std::vector<std::string>& notes() const { return notes_; }

  // Every rank reads its blocks (dimension 0 cut as torch.chunk cuts it) and the checkpoint is
  // saved: the result in the process holding rank 0, nothing elsewhere.
  [[nodiscard]] std::optional<HfImportResult> run(const BackendInfo& backend) const;

 private:
  HfImportSettings settings_;
  const HfAdapter* adapter_ = nullptr;
  std::filesystem::path file_;
  std::shared_ptr<const train::ModelDefinition> model_;
  std::vector<std::string> notes_;
  std::string run_id_;  // an earlier import's, which a forced import saves under
};

}  // namespace shardwise::models

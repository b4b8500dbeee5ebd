#pragma once
// Generation as one library object, beside TrainingJob: a model and its values in, every check
// that can be made before a rank starts, the ranks of a mesh (a 'model' axis splits the model),
// rank 0's text out. `shardwise generate` reads its flags into GenerationSettings, encodes the
// prompt and prints what the job returns; a C++ or Python caller does the same without it.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "shardwise/comm/backend_registry.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/generation.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/setting_names.hpp"

namespace shardwise::train {

struct GenerationSettings {
  std::shared_ptr<const ModelDefinition> model;
  // Fills any rank's blocks of the model's parameters (models::ModelSource::values).
  InitialValues values;
  // What every rank must agree on of the values (models::ModelSource::identity).
  std::string values_identity;
  // A 'model' axis to split the model over; every other axis of size 1.
  Mesh mesh{{"model"}, {1}};
  GenerationOptions options;
  Precision precision = Precision::kFp32;  // what the products compute in
  int threads = 0;  // BLAS threads per rank (0: the library's default, 1 with several ranks)
  // How the caller names these settings in messages (a command: its flags).
  SettingNames names;
};

class GenerationJob {
 public:
  // Checks what can be checked before a rank starts: the mesh (a model axis alone), the
  // sampling, the model's split over the model axis, the stop ids within the vocabulary.
  // InvalidArgument naming the setting otherwise.
  explicit GenerationJob(GenerationSettings settings);

  // What can be checked before the model is read (the mesh, the sampling, the threads), as the
  // constructor checks it: a caller that reads a large model checks these first.
  static void check_before_model(const GenerationSettings& settings);

  [[nodiscard]] const GenerationSettings& settings() const { return settings_; }

  // InvalidArgument where the prompt is empty, holds an id outside the vocabulary, or leaves no
  // room for a new token in the model's context.
  void check_prompt(std::span<const std::int32_t> prompt) const;

  // Generates on every rank `backend` starts (as many as the mesh has devices): rank 0's result
  // in the process that holds rank 0, nothing elsewhere. A rank's input error is the caller's
  // InvalidArgument (rank_runner.hpp).
  [[nodiscard]] std::optional<GenerationResult> run(const BackendInfo& backend,
                                                    std::span<const std::int32_t> prompt) const;
  // One rank's part, collective over `comm` (a world of the mesh's size): for a caller that
  // starts the ranks itself.
  [[nodiscard]] GenerationResult run_rank(Communicator& comm,
                                          std::span<const std::int32_t> prompt) const;

 private:
  GenerationSettings settings_;
  int threads_ = 0;
};

}  // namespace shardwise::train

#pragma once
// One rank's model for generation: its blocks of every parameter, split over the mesh's model
// axis as the family's layers compute with them (the training layout's model split; no
// gradients, no optimizer state), filled from a source's values (a checkpoint's or a Hugging
// Face folder's, models/model_source.hpp), and its decoder. Every rank of the mesh makes one.

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/decoder.hpp"
#include "shardwise/train/generation.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/setting_names.hpp"
#include "shardwise/train/tensor_parallel.hpp"

namespace shardwise::train {

class DecodingModel {
 public:
  // Collective over `context` (whose mesh may have a model axis, every other axis of size 1).
  // InvalidArgument naming the axis where another splits, the family where it does not decode,
  // or the sizes the model axis does not divide; `values`' errors are every rank's error.
  // `values_identity` names the values (models::ModelSource::identity): ranks must agree on it
  // as on the model. The products compute in `precision`.
  DecodingModel(std::shared_ptr<const ModelDefinition> model, const ParallelContext& context,
                const InitialValues& values, std::size_t capacity = 0,
                std::string values_identity = {}, Precision precision = Precision::kFp32);

  // InvalidArgument where `mesh` has an axis of size > 1 other than 'model' (a command checks
  // its --mesh before it starts a rank).
  static void check_mesh(const Mesh& mesh, const SettingNames& named = {});

  [[nodiscard]] Decoder& decoder() { return *decoder_; }
  [[nodiscard]] const TensorParallel& tensor_parallel() const { return tp_; }
  [[nodiscard]] const ParameterStore& parameters() const { return store_; }
  // generation.hpp's generate on this model, after every rank of the context's world agreed on
  // the model and its values, the prompt and the options: InvalidArgument on every rank naming
  // the first that
  // differs from rank 0 ("rank 1 runs with another prompt than rank 0"), where a launch gave the
  // ranks different inputs (their collectives could agree in size and decode garbage, or not,
  // and fail on a mismatched call).
  [[nodiscard]] GenerationResult generate(std::span<const std::int32_t> prompt,
                                          const GenerationOptions& options);

 private:
  std::shared_ptr<const ModelDefinition> model_;
  std::string values_identity_;
  Precision precision_ = Precision::kFp32;
  Communicator* world_;  // the context's: every rank of the job
  TensorParallel tp_;
  ParameterStore store_;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace shardwise::train

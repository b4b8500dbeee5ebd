#pragma once
// A model the training layer can build on any layout: what a model family gives the job (its
// parameters with their logical axes, how tensor parallelism must split them, its layers and
// their cost, the planner's manifest, its checkpoint metadata) and how it runs one chunk of
// its layers. DistributedModel (distributed_model.hpp) builds it on a rank: this rank's blocks of
// the parameters, its pipeline chunks, the micro-batch schedule and the tied parameters' sums,
// none of which a family writes again.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/precision.hpp"
#include "shardwise/strategy/recompute.hpp"
#include "shardwise/train/boundary_element.hpp"
#include "shardwise/train/decoder.hpp"
#include "shardwise/train/expert_parallel.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/pipeline_layout.hpp"
#include "shardwise/train/placement.hpp"
#include "shardwise/train/tensor_parallel.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train {

// One chunk of a model's layers (the whole model without a pipeline), run micro-batch by
// micro-batch: a micro-batch's activations are kept in a slot (one per micro-batch in flight)
// from its forward to its backward.
class ModelChunk {
 public:
  virtual ~ModelChunk() = default;
  // Elements (BoundaryElement) passed to the next chunk per micro-batch of `batch` sequences of
  // `seq` tokens.
  [[nodiscard]] virtual std::size_t boundary_elements(std::size_t batch, std::size_t seq) const = 0;
  // The forward of one micro-batch into `slot`. The first chunk reads `tokens`, later ones
  // `input` (boundary_elements); the last reads `targets` and returns the micro-batch's mean
  // loss, the others write `output` and return 0. Where backward_follows, backward of this
  // slot comes next (a ZeRO-3 chunk may keep its last units gathered for it).
  virtual float forward(std::size_t slot, std::span<const std::int32_t> tokens,
                        std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                        std::span<const BoundaryElement> input, std::span<BoundaryElement> output,
                        bool backward_follows) = 0;
  // Its backward, adding into the store's gradients: the last chunk starts from its loss
  // weighted by `loss_scale`, the others from `output_grad`; every chunk but the first writes
  // its input's gradient to `input_grad`. `ready` hears of each parameter range once final.
  virtual void backward(std::size_t slot, std::span<const BoundaryElement> output_grad,
                        std::span<BoundaryElement> input_grad, float loss_scale,
                        const GradientsReady& ready) = 0;
  // Bytes of the activations kept for backward (every slot) and of the gradients' scratch.
  [[nodiscard]] virtual std::size_t activation_bytes() const = 0;
  // A Mixture of Experts' rows since the chunk was built, over its layers' forwards: the rows
  // its tokens routed (tokens x k) and those its experts computed on (the same on one expert
  // rank; over an expert axis what the dispatch brought). Zeros for a dense chunk.
  struct ExpertRows {
    std::uint64_t routed = 0;
    std::uint64_t computed = 0;
    std::uint64_t dropped = 0;  // of routed, over their experts' capacity
  };
  [[nodiscard]] virtual ExpertRows expert_rows() const { return {}; }
  // The loss added to the last forward of `slot` beside the mean loss it returned, once for the
  // whole batch (a Mixture of Experts' auxiliary load-balancing loss, its statistics summed over
  // the batch's ranks); 0 by default.
  [[nodiscard]] virtual float auxiliary_loss(std::size_t /*slot*/) const { return 0; }
  // torchtitan's auxiliary-loss-free expert bias (ChunkOptions::expert_bias_rate): each of the
  // chunk's layers' bias (layers x experts, its layers in order), which its routers add for the
  // choice, and how many of the rows trained since the last update chose each expert on this
  // rank (the same shape). Empty where the chunk keeps none.
  [[nodiscard]] virtual std::span<float> expert_bias() { return {}; }
  [[nodiscard]] virtual std::span<double> expert_counts() { return {}; }
};

// How a chunk runs on its rank.
struct ChunkOptions {
  LayerRange range;
  TensorParallel tensor_parallel;  // the model axis (degree 1 without)
  ExpertParallel expert_parallel;  // the expert axis (degree 1 without)
  bool sequence_parallel = false;  // activations split along the sequence over the model axis
  Recompute recompute = Recompute::kNone;
  Precision precision = Precision::kFp32;  // what the matrix products compute in
  // What the residual stream is kept in: float32, or under bf16 precision bf16 (each residual
  // add rounded, as Megatron-LM's --bf16 without --fp32-residual-connection).
  DType residual_dtype = DType::kF32;
  // Sums `count` values in place over the ranks the batch is split among (data x fsdp x
  // expert), `batch_ranks` of them, and over the model axis, whose ranks each route a share of a
  // micro-batch's rows through a Mixture of Experts; empty: this rank holds the whole batch.
  // What a loss over the whole batch (a Mixture of Experts' auxiliary loss) sums its statistics
  // with.
  std::function<void(double* values, std::size_t count)> sum_over_batch;
  std::size_t batch_ranks = 1;
  // A Mixture of Experts' capacity factor: each expert takes at most ceil(factor x seq x k /
  // experts) of a sequence's choices, the rest dropped (0: dropless).
  double capacity_factor = 0;
  // A Mixture of Experts' auxiliary-loss-free expert bias (torchtitan's load_balance_coeff):
  // where above 0 the chunk keeps each layer's bias and counts (ModelChunk::expert_bias).
  double expert_bias_rate = 0;
};

class ModelDefinition {
 public:
  virtual ~ModelDefinition() = default;

  // The family's name ("gpt"), as the registry and the checkpoints know it.
  [[nodiscard]] virtual std::string family() const = 0;
  // The configuration as a JSON object: checkpoint metadata's "model", a run log's, and what a
  // family reads back to build the same model.
  [[nodiscard]] virtual std::string config_json() const = 0;
  // For a person: "a GPT of n_layer 4, n_head 4, ...".
  [[nodiscard]] virtual std::string describe() const = 0;
  // For a person, a configuration this family or another wrote (a checkpoint's model, beside
  // this one); the default echoes the JSON.
  [[nodiscard]] virtual std::string describe_config(const std::string& config_json) const;
  [[nodiscard]] virtual std::size_t vocab_size() const = 0;
  // The longest sequence the model takes.
  [[nodiscard]] virtual std::size_t context_length() const = 0;
  // The repeated layers a pipeline splits among its stages.
  [[nodiscard]] virtual std::size_t layers() const = 0;

  // Every parameter of the whole model in the store's order, with its logical axes, unit and
  // initialisation.
  [[nodiscard]] virtual std::vector<ParameterSpec> parameters() const = 0;
  // The layer each parameter (parameters() order) belongs to, or -1 for those outside the
  // layers (embeddings, final norm, head).
  [[nodiscard]] virtual std::vector<std::int64_t> parameter_layers() const = 0;
  // The names of the parameters a chunk of `range` reads. A parameter two chunks on different
  // pipeline ranks read (a tied embedding) is held by both; its gradients are summed between
  // them, and the first rank's copy is the one that counts (ParameterSpec::tied_copy).
  [[nodiscard]] virtual std::vector<std::string> chunk_parameters(
      const LayerRange& range) const = 0;
  // The split over the model axis the layers compute with, for `degree` ranks (P() for every
  // parameter where it is 1): an InvalidArgument names what the degree does not divide.
  [[nodiscard]] virtual std::vector<PartitionSpec> model_placements(int degree) const = 0;
  // The parameters model_placements leaves whole of which each of `degree` model ranks computes
  // with one block of rows (placement.hpp); the chunk sums their gradients among the ranks
  // sharing a block. The default: none.
  [[nodiscard]] virtual std::vector<SharedRows> shared_rows(int degree) const;
  // The planner's manifest (names, shapes, logical axes and their units).
  [[nodiscard]] virtual ModelManifest manifest() const = 0;
  // Forward FLOPs per token of each layer at sequence length `seq`, and of the head (counted on
  // the last stage): the costs stages are balanced by.
  [[nodiscard]] virtual std::vector<double> layer_flops(std::size_t seq) const = 0;
  [[nodiscard]] virtual double head_flops() const = 0;
  // Refuses options the family cannot run (an InvalidArgument naming `field` and the value);
  // by default every option runs (GPT-2 and Llama run them all; the chunk refuses sequence
  // parallelism without a model axis itself).
  virtual void check_options(bool /*sequence_parallel*/, Recompute /*recompute*/,
                             const std::string& /*field*/) const {}
  // Refuses splitting the layers over `stages` pipeline stages where the family cannot (an
  // InvalidArgument naming `field`, the mesh); by default any split runs.
  virtual void check_stages(std::int64_t /*stages*/, const std::string& /*field*/) const {}
  // One chunk reading its parameters from `store` (which holds at least chunk_parameters of
  // the range, split as model_placements say).
  [[nodiscard]] virtual std::unique_ptr<ModelChunk> build_chunk(
      ParameterStore& store, const ChunkOptions& options) const = 0;
  // Whether build_decoder makes one (the default: no; such a family trains but does not
  // generate).
  [[nodiscard]] virtual bool decodes() const { return false; }
  // A decoder of the whole model (every layer and the head) reading `store`, which holds every
  // parameter split over the model axis as model_placements and shared_rows say for
  // `tensor_parallel`'s degree, caching at most `capacity` positions (0: the context), its
  // products in `precision`. The default throws InvalidArgument naming the family.
  [[nodiscard]] virtual std::unique_ptr<Decoder> build_decoder(
      ParameterStore& store, const TensorParallel& tensor_parallel, std::size_t capacity,
      Precision precision) const;
};

// Where a chunk of `range` finds each of the model's parameters (parameters() order) in
// `store`: its index there, or kNotHeld for a parameter the chunk does not read. InvalidArgument
// naming the parameter where the store holds it in another shape than its block of `degree`
// ranks (model_placements, shared_rows).
inline constexpr std::size_t kNotHeld = static_cast<std::size_t>(-1);
[[nodiscard]] std::vector<std::size_t> chunk_parameter_indices(const ModelDefinition& model,
                                                               const ParameterStore& store,
                                                               const LayerRange& range, int degree,
                                                               int expert_degree = 1);

// How the model's layers split each parameter for good over `degree` model ranks and
// `expert_degree` expert ranks: model_placements(degree), and a Mixture of Experts' stacked
// weights (logical axes starting "experts") split along their experts over the expert axis.
// InvalidArgument where the expert degree does not divide the experts, or the model has none to
// split.
[[nodiscard]] std::vector<PartitionSpec> fixed_placements(const ModelDefinition& model, int degree,
                                                          int expert_degree);

// Throws InvalidArgument naming the first parameter `placements` split otherwise than the
// model's layers compute (fixed_placements).
void check_model_placements(const ModelDefinition& model, int degree, int expert_degree,
                            const std::vector<PartitionSpec>& placements);

}  // namespace shardwise::train

#pragma once
// One chunk of a transformer's layers on one rank (train::ModelChunk), assembled from its parts:
// the embeddings where the chunk starts the model, its layers (norm, attention, residual and
// norm, MLP, residual), and the final norm, head and loss where it ends it. The machinery every
// family shares is here once: micro-batch slots from forward to backward, each parameter unit
// gathered just before its use and released after (ZeRO-3), full recomputation of a layer in its
// backward, and gradients announced as they become final. Every array comes from the chunk's
// ActivationTable, which the planner sums too.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "attention_part.hpp"
#include "embedding_part.hpp"
#include "head_part.hpp"
#include "mlp_part.hpp"
#include "model_axis.hpp"
#include "norm_part.hpp"
#include "shardwise/strategy/activation_table.hpp"
#include "shardwise/train/boundary_element.hpp"
#include "shardwise/train/chunk_inputs.hpp"
#include "shardwise/train/transformer_spec.hpp"

namespace shardwise::train::transformer {

class TransformerChunk final : public ModelChunk {
 public:
  TransformerChunk(const TransformerSpec& spec, const ModelDefinition& model, ParameterStore& store,
                   const ChunkOptions& options);

  [[nodiscard]] std::size_t boundary_elements(std::size_t batch, std::size_t seq) const override;
  float forward(std::size_t slot, std::span<const std::int32_t> tokens,
                std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                std::span<const BoundaryElement> input, std::span<BoundaryElement> output,
                bool backward_follows) override;
  void backward(std::size_t slot, std::span<const BoundaryElement> output_grad,
                std::span<BoundaryElement> input_grad, float loss_scale,
                const GradientsReady& ready) override;
  [[nodiscard]] std::size_t activation_bytes() const override;
  [[nodiscard]] ExpertRows expert_rows() const override;
  [[nodiscard]] float auxiliary_loss(std::size_t slot) const override;
  [[nodiscard]] std::span<float> expert_bias() override { return expert_bias_; }
  [[nodiscard]] std::span<double> expert_counts() override { return expert_counts_; }

 private:
  // An array's bytes, of its element type.
  struct Storage {
    std::vector<std::byte> bytes;
    void assign(std::size_t count, DType type) {
      bytes.assign(count * size_in_bytes(type), std::byte{0});
    }
    [[nodiscard]] float* f32() { return reinterpret_cast<float*>(bytes.data()); }
    [[nodiscard]] BFloat16* bf16() { return reinterpret_cast<BFloat16*>(bytes.data()); }
  };
  // One array per Activation (empty where a lifetime does not hold it).
  using Arrays = std::array<Storage, kActivationCount>;
  struct Slot {
    std::size_t batch = 0, seq = 0;
    bool head_held = false;                // forward left the head's units gathered for backward
    std::optional<ActivationTable> table;  // of batch and seq: what each array holds
    std::vector<std::int32_t> tokens, targets;
    Arrays arrays;  // the layers' (side by side), their outputs and the micro-batch's
    // A Mixture of Experts' auxiliary loss: its routing's statistics over every layer (the
    // experts' assignments, then their probabilities' sums), its value and its gradient.
    std::vector<double> routing;
    float aux_loss = 0;
    std::vector<float> aux_gradient;
  };
  // Layer i's arrays of a slot (i counted from the chunk's first layer): the float32 arrays the
  // parts compute in and read, and where an array is kept in bf16, the place it is kept (its
  // float32 array then the working layer's, the same for every layer).
  struct Layer {
    std::array<float*, kActivationCount> at{};
    std::array<BFloat16*, kActivationCount> kept{};
    std::array<std::size_t, kActivationCount> count{};
    float* operator[](Activation a) const { return at[static_cast<std::size_t>(a)]; }
  };

  [[nodiscard]] ActivationTable table(std::size_t batch, std::size_t seq) const;
  [[nodiscard]] Rows rows(std::size_t batch, std::size_t seq) const;
  void size_slot(Slot& slot, std::size_t batch, std::size_t seq);
  void size_scratch(std::size_t batch, std::size_t seq);
  [[nodiscard]] Layer layer(Slot& slot, std::size_t i);
  [[nodiscard]] float* scratch(Activation a) { return scratch_[static_cast<std::size_t>(a)].f32(); }
  [[nodiscard]] float* micro_batch(Slot& slot, Activation a) {
    return slot.arrays[static_cast<std::size_t>(a)].f32();
  }
  // Backward: layer i's input (i == layers(): the head's), in float32; where the stream is
  // narrow, widened from its kept rounding into kStreamInput.
  [[nodiscard]] const float* stream_input(Slot& slot, std::size_t i);
  // The layer's arrays kept in bf16, for the products (Products::use_kept): the parts round
  // them into their kept places in forward and widen what they read in backward.
  [[nodiscard]] static std::vector<KeptArray> kept_arrays(const Layer& layer);
  [[nodiscard]] static AttentionPart::Arrays attention_arrays(const Layer& a);
  // `routing`: where a Mixture of Experts adds its statistics for the auxiliary loss (the first
  // forward of a micro-batch; not a recomputation's). `dprobability`: that loss's gradient.
  // Layer l's expert bias and choice counts (l of the model), or null.
  [[nodiscard]] const float* layer_bias(std::size_t l) const;
  [[nodiscard]] double* layer_counts(std::size_t l);
  void layer_forward(const Layer& a, const float* residual, std::size_t l, const Rows& rows,
                     double* routing = nullptr);
  void layer_backward(const Layer& a, const float* residual, std::size_t l, const Rows& rows,
                      const float* dprobability = nullptr);
  // After a micro-batch's forward: its auxiliary loss and gradient from the statistics, summed
  // over the batch's ranks.
  void finish_auxiliary_loss(Slot& slot, const Rows& rows);
  [[nodiscard]] ParameterView parameters(std::size_t first) const {
    return ParameterView(store_, index_, first, axis_.products().precision());
  }
  [[nodiscard]] std::size_t unit(std::size_t parameter) const {
    return store_.unit_of(index_[parameter]);
  }
  void gather_head();
  void release_head();
  // Tells `ready` of parameters [first, last] (the store's order), final now.
  void tell(const GradientsReady& ready, std::size_t first, std::size_t last) const;
  [[nodiscard]] std::size_t layers() const { return range_.end_layer - range_.first_layer; }
  [[nodiscard]] ChunkLimits limits() const;

  TransformerSpec spec_;
  TransformerParameterLayout places_;
  LayerRange range_;
  bool has_head_ = false;
  ParameterStore& store_;
  // The chunk's element types (ElementTypes::fp32() or bf16_compute()).
  ElementTypes types_;
  bool sequence_parallel_ = false;
  Recompute recompute_ = Recompute::kNone;
  std::vector<std::size_t> index_;  // the store's index of each of the model's parameters
  ModelAxis axis_;
  ExpertParallel experts_;
  std::function<void(double*, std::size_t)> sum_over_batch_;
  std::size_t batch_ranks_ = 1;
  // The expert bias and counts of the chunk's layers (layers x experts; empty without).
  std::vector<float> expert_bias_;
  std::vector<double> expert_counts_;
  NormPart norm_;
  AttentionPart attention_;
  MlpPart mlp_;
  EmbeddingPart embedding_;
  HeadPart head_;
  std::vector<std::unique_ptr<Slot>> slots_;
  // The one layer the layers are computed in (ActivationTable::working_layer_bytes): full
  // recomputation's layer (its output excepted), or the float32 arrays of layers kept in bf16.
  Arrays working_;
  std::size_t working_batch_ = 0, working_seq_ = 0;
  Arrays scratch_;
  bool attention_grads_in_mlp_ = false;
  std::size_t scratch_batch_ = 0, scratch_seq_ = 0;
};

}  // namespace shardwise::train::transformer

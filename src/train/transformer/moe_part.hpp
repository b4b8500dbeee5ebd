#pragma once
// A Mixture of Experts in place of a layer's MLP (transformers' MixtralSparseMoeBlock and
// Qwen3MoeSparseMoeBlock): a router product gives each token's logits over the experts; the
// kernels' router takes their softmax and chooses each token's k experts (moe_router.hpp); the
// tokens' rows, grouped by expert, go through each expert's gated-SiLU MLP as grouped products,
// one per expert's block of rows for each of its matrices (the stacked parameters' blocks, in the
// chunk's precision); each token's output is its choices' outputs weighted. Dropless by default:
// every token reaches every expert it chose. With a capacity factor each expert takes at most
// its capacity of each sequence's choices, in token order, and the others add nothing
// (kernels::drop_over_capacity).
//
// Over an expert axis (ExpertParallel) each rank holds E / degree experts: the grouped rows go to
// the ranks holding their experts and their outputs come back (expert_dispatch.hpp); backward
// sends the outputs' gradients the same way and brings the inputs' back.
//
// Over a model axis of t ranks the experts are folded over it too (ExpertParallel; Megatron-LM's
// parallel folding, expert tensor parallelism 1): each model rank routes its share of the whole
// rows (first_moe_row: whole sequences where t divides the batch) through the experts, and the
// shares are summed over the axis as a row-parallel output is (reduce-scattered under sequence
// parallelism); backward gives the input's gradient of its share's rows, zeros elsewhere, which
// the chunk sums as a column-parallel input's. The router, whole on every model rank, gets its
// gradient summed over the axis.
//
// Its parameters in the layer's MLP place: the router (experts x hidden), the experts' gate and
// up (experts x 2 width x hidden, each expert's gate rows then its up rows) and down (experts x
// hidden x width), this rank's experts of them. What it keeps: the table's kRouter, the
// probabilities, from which backward chooses again rather than keeping the choice; kMlp (routed
// rows = tokens x k): the routed rows and their outputs, and on one expert rank their gate and up
// products and activations too. Over an expert axis the rows this rank's experts receive vary
// with the routing: their arrays (the rows, gate and up products, activations) are kept outside
// the table, from a layer's forward to its backward.

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "expert_dispatch.hpp"
#include "model_axis.hpp"
#include "parameter_view.hpp"
#include "rows.hpp"
#include "shardwise/kernels/moe_experts.hpp"
#include "shardwise/strategy/transformer_shape.hpp"
#include "shardwise/train/expert_parallel.hpp"

namespace shardwise::train::transformer {

class MoePart {
 public:
  // InvalidArgument where the ranks the experts are split over (model x expert) do not divide
  // them or do not span the model axis, or the capacity factor is negative or not finite (0:
  // dropless).
  MoePart(const TransformerShape& shape, const ModelAxis& axis, const ExpertParallel& experts,
          double capacity_factor = 0);

  // `out` (the rows this rank holds, the whole rows on one model rank) from `normed` (whole
  // rows). InvalidArgument for a capacity over model ranks that do not divide the batch. Where
  // `routing` is given (2 x experts: assignments, then probability sums), the routing's
  // statistics for the auxiliary loss are added to it (kernels::add_routing_statistics). `bias`
  // (experts, or null): the expert bias the choice adds (kernels::choose_experts).
  void forward(float* out, float* arrays, float* router, const float* normed,
               const ParameterView& p, const Rows& rows, double* routing = nullptr,
               const float* bias = nullptr) const;
  // From the output's gradient (whole rows): the parameters' gradients added, the input's
  // written to `dnormed` (whole rows, this rank's part); `arrays` and `router` are written over.
  // `dprobability` (experts, or null): the auxiliary loss's gradient of every row's probability
  // of each expert. `bias`: forward's. `counts` (experts, or null): how many of this rank's rows'
  // choices each expert got are added to it (the expert bias' update reads them; backward counts
  // each trained row once, whatever forward recomputation ran).
  void backward(float* dnormed, const float* dout, float* arrays, float* router,
                const float* normed, const ParameterView& p, const Rows& rows,
                const float* dprobability = nullptr, const float* bias = nullptr,
                double* counts = nullptr) const;

  // Bytes of the experts' arrays kept outside the table now (over an expert axis), and the most
  // ever kept at once.
  [[nodiscard]] std::size_t expert_bytes() const { return expert_bytes_; }
  [[nodiscard]] std::size_t peak_expert_bytes() const { return peak_expert_bytes_; }
  // Rows this part's tokens routed (tokens x k) and rows its experts computed on, over its
  // forwards since construction.
  [[nodiscard]] std::uint64_t routed_rows() const { return routed_rows_; }
  [[nodiscard]] std::uint64_t computed_rows() const { return computed_rows_; }
  // Choices dropped over their experts' capacity, over its forwards.
  [[nodiscard]] std::uint64_t dropped_rows() const { return dropped_rows_; }

 private:
  // Rows and what the experts make of them: rows x hidden, x 2 width, x width, x hidden.
  struct Routed {
    float* inputs = nullptr;
    float* gate_up = nullptr;
    float* activation = nullptr;
    float* outputs = nullptr;
  };
  // What this rank's experts received in a layer's forward, kept for its backward.
  struct ExpertRows {
    ExpertDispatch dispatch;
    std::vector<float> inputs, gate_up, activation, outputs;
  };
  [[nodiscard]] Routed routed(float* arrays, std::size_t tokens) const;
  // This model rank's share of `rows` (all of them on one model rank): its first row and rows.
  [[nodiscard]] Rows share(const Rows& rows, std::size_t* first) const;
  // forward and backward over one share's rows (`normed`, `out`, `dout` and `dnormed` at its
  // first row), each rank routing at most `most_rows` rows; backward adds the router's gradient
  // to `router_grad`.
  void forward_rows(float* out, float* arrays, float* router, const float* normed,
                    const ParameterView& p, const Rows& rows, std::size_t most_rows,
                    double* routing, const float* bias) const;
  void backward_rows(float* dnormed, const float* dout, float* arrays, float* router,
                     const float* normed, const ParameterView& p, const Rows& rows,
                     const float* dprobability, const float* bias, double* counts,
                     float* router_grad) const;
  // The choice of each token's experts from the probabilities, and the rows grouped by expert.
  void choose(const float* probabilities, const Rows& rows, const float* bias) const;
  // The rows grouped by expert from the choice, the capacity's drops left out; returns how many.
  std::size_t group(const Rows& rows) const;
  // This rank's experts over their rows: x's gate and up products, activations and outputs from
  // its inputs; backward, from the outputs' gradients in x.outputs, the inputs' in x.inputs.
  void experts_forward(const Routed& x, const ExpertDispatch& d, const ParameterView& p) const;
  void experts_backward(const Routed& x, const ExpertDispatch& d, const ParameterView& p) const;
  [[nodiscard]] bool dispatched() const { return experts_.degree() > 1; }
  void hold(const ExpertRows& rows, bool more) const;

  std::size_t hidden_, experts_count_, k_, width_;
  bool renormalize_;
  double capacity_factor_;
  const ModelAxis& axis_;
  const ExpertParallel& experts_;
  // The layer's choice (tokens x k), weights and their gradients, and its grouping: made in
  // forward and again in backward (one layer at a time per chunk).
  mutable std::vector<std::int32_t> chosen_;
  mutable std::vector<float> weights_, dweights_;
  mutable std::vector<std::uint8_t> dropped_;
  mutable kernels::ExpertGroups groups_;
  // Over an expert axis: each layer's received rows in flight by its `router` array (kRouter, one
  // per layer and micro-batch slot, where kMlp may be the one working layer of every layer), and
  // the rows as they travel.
  mutable std::map<const float*, ExpertRows> received_;
  mutable std::vector<float> staging_;
  // Over a model axis: this rank's share of the router's gradient, before the axis sums it.
  mutable std::vector<float> router_grad_;
  mutable std::size_t expert_bytes_ = 0, peak_expert_bytes_ = 0;
  mutable std::uint64_t routed_rows_ = 0, computed_rows_ = 0, dropped_rows_ = 0;
};

}  // namespace shardwise::train::transformer

#pragma once
// A Mixture of Experts in place of a layer's MLP (transformers' MixtralSparseMoeBlock and
// Qwen3MoeSparseMoeBlock): a router product gives each token's logits over the experts; the
// kernels' router takes their softmax and chooses each token's k experts (moe_router.hpp); the
// tokens' rows, grouped by expert, go through each expert's gated-SiLU MLP as grouped products,
// one per expert's block of rows for each of its matrices (the stacked parameters' blocks, in the
// chunk's precision); each token's output is its choices' outputs weighted. Dropless: every
// token reaches every expert it chose.
//
// Its parameters in the layer's MLP place: the router (experts x hidden), the experts' gate and
// up (experts x 2 width x hidden, each expert's gate rows then its up rows) and down (experts x
// hidden x width). What it keeps (the table's kMlp, routed rows = tokens x k): the routed rows,
// their gate and up products, activations and outputs; and kRouter, the probabilities, from which
// backward chooses again rather than keeping the choice.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model_axis.hpp"
#include "parameter_view.hpp"
#include "rows.hpp"
#include "shardwise/kernels/moe_experts.hpp"
#include "shardwise/strategy/transformer_shape.hpp"

namespace shardwise::train::transformer {

class MoePart {
 public:
  // InvalidArgument where the model axis has more than one rank (experts are not split over it).
  MoePart(const TransformerShape& shape, const ModelAxis& axis);

  // `out` (the rows this rank holds, the whole rows on one model rank) from `normed`.
  void forward(float* out, float* arrays, float* router, const float* normed,
               const ParameterView& p, const Rows& rows) const;
  // The parameters' gradients added, the input's written to `dnormed`; `arrays` and `router`
  // are written over.
  void backward(float* dnormed, const float* dout, float* arrays, float* router,
                const float* normed, const ParameterView& p, const Rows& rows) const;

 private:
  struct Routed {
    float* inputs;
    float* gate_up;
    float* activation;
    float* outputs;
  };
  [[nodiscard]] Routed routed(float* arrays, std::size_t tokens) const;
  // The choice of each token's experts from the probabilities, and the rows grouped by expert.
  void choose(const float* probabilities, std::size_t tokens) const;

  std::size_t hidden_, experts_, k_, width_;
  bool renormalize_;
  const ModelAxis& axis_;
  // The layer's choice (tokens x k), weights and their gradients, and its grouping: made in
  // forward and again in backward (one layer at a time per chunk).
  mutable std::vector<std::int32_t> chosen_;
  mutable std::vector<float> weights_, dweights_;
  mutable kernels::ExpertGroups groups_;
};

}  // namespace shardwise::train::transformer

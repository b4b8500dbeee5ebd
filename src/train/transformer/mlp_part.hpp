#pragma once
// The MLP over this rank's share of its width (Megatron-LM's split): GELU (tanh) between a
// column-parallel and a row-parallel matrix, with or without biases, or the gated SiLU of Llama
// (gate and up column-parallel, down row-parallel). Its gradients are written over the arrays
// they are the gradients of where the kernels allow it (the table's kMlpGrad holds GELU's input
// gradient), so the dead arrays can then hold attention's.

#include <cstddef>
#include <optional>
#include <vector>

#include "model_axis.hpp"
#include "moe_part.hpp"
#include "parameter_view.hpp"
#include "rows.hpp"
#include "shardwise/strategy/transformer_shape.hpp"

namespace shardwise::train::transformer {

class MlpPart {
 public:
  // `experts`: the expert axis a Mixture of Experts' experts are split over; `capacity_factor`
  // its experts' capacity (0: dropless; MoePart).
  MlpPart(const TransformerShape& shape, const ModelAxis& axis, const ExpertParallel& experts,
          double capacity_factor = 0);

  // The Mixture of Experts in the MLP's place; null for a dense MLP.
  [[nodiscard]] const MoePart* moe() const { return moe_ ? &*moe_ : nullptr; }
  // Whether layer `layer`'s MLP is the Mixture of Experts (TransformerShape::moe_layer); the
  // others run the dense MLP of the shape's mlp_width.
  [[nodiscard]] bool routes(std::size_t layer) const;

  [[nodiscard]] std::size_t width() const { return width_; }
  // `arrays` (kMlp) and, for a Mixture of Experts (moe_part.hpp), `router` (kRouter; else
  // unused) from `normed` (whole rows); `out` gets the row-parallel output's rows this rank holds.
  // `routing`, `bias`: a Mixture of Experts' statistics for the auxiliary loss and expert bias
  // (MoePart::forward).
  void forward(std::size_t layer, float* out, float* arrays, float* router, const float* normed,
               const ParameterView& p, const Rows& rows, double* routing = nullptr,
               const float* bias = nullptr) const;
  // From the output's gradient (whole rows): the parameters' gradients added, the input's
  // written to `dnormed` (whole rows, this rank's part); `arrays` (and `router`) are
  // overwritten, `scratch` is kMlpGrad.
  // `dprobability`, `bias`, `counts`: a Mixture of Experts' (MoePart::backward).
  void backward(std::size_t layer, float* dnormed, float* scratch, const float* dout, float* arrays,
                float* router, const float* normed, const ParameterView& p, const Rows& rows,
                const float* dprobability = nullptr, const float* bias = nullptr,
                double* counts = nullptr) const;

 private:
  std::optional<MoePart> moe_;
  MlpKind kind_;
  bool bias_ = false;
  std::size_t hidden_ = 0, width_ = 0;
  TransformerShape shape_;  // which layers route (TransformerShape::moe_layer)
  const ModelAxis& axis_;
};

}  // namespace shardwise::train::transformer

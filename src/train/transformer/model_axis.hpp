#pragma once
// How a chunk's rows and sums cross the model axis (Megatron-LM's tensor parallelism, and
// sequence parallelism after Korthikanti et al. 2022): a norm's rows gathered along the sequence,
// a row-parallel product summed (or reduce-scattered), a column-parallel input's gradient summed
// (or reduce-scattered), a row-parallel output's gradient gathered. Without sequence parallelism
// the local rows are the whole and the gathers are nothing. It holds the chunk's Products too,
// which every part that crosses the axis runs its products through.

#include <cstddef>

#include "parameter_view.hpp"
#include "products.hpp"
#include "rows.hpp"
#include "shardwise/train/tensor_parallel.hpp"

namespace shardwise::train::transformer {

class ModelAxis {
 public:
  // The scratch sequence parallelism needs (the chunk's table: kNormLocal, kNormGradLocal,
  // kPartialSum, kGathered, kNormParameterGrads); null without it.
  struct Scratch {
    float* norm_local = nullptr;
    float* norm_grad_local = nullptr;
    float* partial = nullptr;
    float* gathered = nullptr;
    float* norm_parameter_grads = nullptr;
  };

  // Activations cross the axis in `messages`: float32, or bf16 (training in bf16, as Megatron-LM
  // sends them; a split product's partial sums then round before they are added).
  ModelAxis(TensorParallel tensor_parallel, bool sequence_parallel, std::size_t hidden,
            Precision precision, DType messages)
      : tp_(tensor_parallel),
        sequence_parallel_(sequence_parallel),
        hidden_(hidden),
        products_(precision),
        messages_(messages) {}

  void use(const Scratch& scratch) { scratch_ = scratch; }
  [[nodiscard]] const TensorParallel& tp() const { return tp_; }
  [[nodiscard]] bool sequence_parallel() const { return sequence_parallel_; }
  [[nodiscard]] std::size_t hidden() const { return hidden_; }
  [[nodiscard]] const Scratch& scratch() const { return scratch_; }
  // The chunk's matrix products, in its precision.
  [[nodiscard]] const Products& products() const { return products_; }
  // The type activations and their gradients cross the axis in.
  [[nodiscard]] DType messages() const { return messages_; }

  // Where a norm writes this rank's rows of an output kept whole in `whole`.
  [[nodiscard]] float* norm_rows(float* whole) const {
    return sequence_parallel_ ? scratch_.norm_local : whole;
  }
  // After a norm wrote norm_rows(whole): the whole rows in `whole`.
  void gather_norm(float* whole, const Rows& rows) const;
  // A row-parallel layer's output, this rank's rows: the product of this rank's columns (with
  // the weight p's `weight`) summed over the axis (reduce-scattered along the sequence), then the
  // bias added once.
  void row_parallel(float* out, const float* inp, const ParameterView& p, std::size_t weight,
                    const float* bias, std::size_t in_local, const Rows& rows) const;
  // Where a row-parallel output's partial sums are written, every whole row: `out` itself
  // without sequence parallelism, the scratch with it.
  [[nodiscard]] float* partial_rows(float* out) const {
    return sequence_parallel_ ? scratch_.partial : out;
  }
  // After partial_rows(out) holds this rank's part of every whole row: `out` gets this rank's
  // rows of their sum over the axis.
  void sum_partial_rows(float* out, const Rows& rows) const;
  // The same over `count` whole rows, without sequence parallelism (decoding).
  void row_parallel(float* out, const float* inp, const ParameterView& p, std::size_t weight,
                    const float* bias, std::size_t in_local, std::size_t count) const;
  // A column-parallel layer's input gradient (`whole`, this rank's part) summed over the axis:
  // this rank's rows of it.
  const float* column_input_grad(float* whole, const Rows& rows) const;
  // A row-parallel layer's output gradient, whole.
  const float* whole_output_grad(const float* local, const Rows& rows) const;
  // Under sequence parallelism a norm's parameters' gradients come from this rank's positions
  // only: `compute` writes one pass's share into zeroed scratch, which is summed over the axis
  // and added to `grads` (count each); without, `compute` adds into `grads` directly.
  template <typename Compute>
  void norm_parameter_grads(float* const* grads, std::size_t count, Compute&& compute) const;

 private:
  void sum_norm_parameter_grads(float* const* grads, std::size_t count) const;

  TensorParallel tp_;
  bool sequence_parallel_ = false;
  std::size_t hidden_ = 0;
  Products products_;
  DType messages_ = DType::kF32;
  Scratch scratch_;
};

template <typename Compute>
void ModelAxis::norm_parameter_grads(float* const* grads, std::size_t count,
                                     Compute&& compute) const {
  if (!sequence_parallel_) {
    compute(grads);
    return;
  }
  float* shares[2] = {scratch_.norm_parameter_grads, scratch_.norm_parameter_grads + hidden_};
  for (std::size_t i = 0; i < count * hidden_; ++i) scratch_.norm_parameter_grads[i] = 0.0F;
  compute(static_cast<float* const*>(shares));
  sum_norm_parameter_grads(grads, count);
}

}  // namespace shardwise::train::transformer

#pragma once
// The element type of each kind of array a training step holds: the parameters the optimizer
// updates, the copies the products read, the gradients, what is reduced, the optimizer's
// moments, the activations and the statistics. The planner sizes memory and traffic array by
// array from it; a trainer states the types it runs.

#include <cstddef>

#include "shardwise/core/dtype.hpp"

namespace shardwise {

struct ElementTypes {
  DType master = DType::kF32;       // the parameters the optimizer updates
  DType compute = DType::kF32;      // the parameters' copies the products read (and ZeRO-3 gathers)
  DType gradients = DType::kF32;    // gradients as backward accumulates them
  DType reduce = DType::kF32;       // gradients as the data-parallel ranks reduce them
  DType optimizer = DType::kF32;    // each of AdamW's two moments
  DType activations = DType::kF32;  // what a layer keeps for backward, but the residual stream
  // Norms' statistics, log-sum-exps and losses: float32 in every precision the field trains.
  DType statistics = DType::kF32;
  // Activations and their gradients as they cross the model (tensor-parallel) axis and pass
  // between pipeline stages.
  DType messages = DType::kF32;
  // The residual stream a chunk keeps: each layer's input and output, the sum after attention.
  DType stream = DType::kF32;
  // What a chunk computes in: its scratch (activations' gradients, outputs before they are kept)
  // and, where `activations` is narrower, the one layer a layer's arrays are computed in before
  // they are kept.
  DType working = DType::kF32;

  // Everything float32.
  [[nodiscard]] static constexpr ElementTypes fp32() { return {}; }
  // Mixed precision as Rajbhandari et al. (2020) count it and Megatron-LM keeps it: bf16
  // parameters, gradients and activations (the residual stream too); float32 master parameters
  // and moments.
  [[nodiscard]] static constexpr ElementTypes bf16_mixed() {
    ElementTypes t;
    t.compute = t.gradients = t.reduce = t.activations = t.messages = DType::kBF16;
    t.stream = t.working = DType::kBF16;
    return t;
  }
  // shardwise's bf16 (docs/precision.md): float32 masters, gradients and moments; the
  // computation reads bf16 roundings of the parameters, which ZeRO-3 gathers in bf16; the
  // products' inputs and outputs are rounded to bf16 (autocast's) and layers keep them in bf16;
  // the statistics and what a chunk computes in stay float32; the residual stream is kept in
  // `stream` (float32 as autocast's, or bf16 as Megatron-LM's without
  // --fp32-residual-connection); activations cross the model axis and pipeline stages in bf16;
  // gradients reduced in float32 (the trainer's default reduce_dtype).
  [[nodiscard]] static constexpr ElementTypes bf16_compute(DType stream = DType::kF32) {
    ElementTypes t;
    t.compute = t.activations = t.messages = DType::kBF16;
    t.stream = stream;
    return t;
  }
  // Whether a layer's arrays are computed in a wider type than they are kept in.
  [[nodiscard]] constexpr bool kept_narrower() const { return activations != working; }
  // Whether the residual stream is computed in a wider type than it is kept in.
  [[nodiscard]] constexpr bool stream_narrower() const { return stream != working; }
  // A separate master copy exists where the products read another type than the optimizer
  // updates.
  [[nodiscard]] constexpr bool separate_master() const { return master != compute; }

  friend constexpr bool operator==(const ElementTypes&, const ElementTypes&) = default;
};

}  // namespace shardwise

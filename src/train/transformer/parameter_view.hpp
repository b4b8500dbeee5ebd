#pragma once
// A part's parameters as the store holds them now: the part's j-th parameter is the model's
// parameter first + j (the store's order, transformer_spec.hpp), found through the chunk's
// index of the store.

#include <cstddef>
#include <vector>

#include "shardwise/strategy/precision.hpp"
#include "shardwise/train/parameter_store.hpp"

namespace shardwise::train::transformer {

class ParameterView {
 public:
  ParameterView(ParameterStore& store, const std::vector<std::size_t>& index, std::size_t first,
                Precision precision)
      : store_(&store), index_(&index), first_(first), precision_(precision) {}
  // The values the optimizer updates (float32 products read them too).
  [[nodiscard]] float* value(std::size_t j) const { return store_->value(at(j)); }
  // What the computation reads where the parameter is not a product's weight (norms, biases,
  // positions): its values in float32, its bf16 rounding widened in bf16, as the products'
  // copies are rounded (docs/precision.md).
  [[nodiscard]] const float* read(std::size_t j) const {
    return precision_ == Precision::kFp32 ? store_->value(at(j)) : store_->compute_float(at(j));
  }
  [[nodiscard]] float* grad(std::size_t j) const { return store_->grad(at(j)); }
  // Its bf16 copy, as bf16 products read it.
  [[nodiscard]] const BFloat16* compute(std::size_t j) const {
    return store_->compute_value(at(j));
  }
  [[nodiscard]] std::size_t at(std::size_t j) const { return (*index_)[first_ + j]; }
  // The view of parameters from j on.
  [[nodiscard]] ParameterView from(std::size_t j) const {
    return ParameterView(*store_, *index_, first_ + j, precision_);
  }
  [[nodiscard]] Precision precision() const { return precision_; }

 private:
  ParameterStore* store_;
  const std::vector<std::size_t>* index_;
  std::size_t first_;
  Precision precision_;
};

}  // namespace shardwise::train::transformer

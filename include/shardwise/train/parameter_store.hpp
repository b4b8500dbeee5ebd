#pragma once
// A model's named parameters in one flat buffer (as llm.c keeps them), each a view: an offset
// and a size. Gradients live in a second buffer of the same layout. Initial values depend only
// on a parameter's name, the element's global index and the seed, so every layout of the same
// model starts from the same global parameters.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shardwise/core/shape.hpp"

namespace shardwise::train {

// How a parameter starts: normal(0, std), all zeros or all ones.
struct ParameterInit {
  enum class Kind { kNormal, kZeros, kOnes };
  Kind kind = Kind::kNormal;
  float std = 0.02F;
};

struct ParameterSpec {
  std::string name;  // "transformer.h.0.attn.c_attn.weight"
  Shape shape;
  std::vector<std::string> logical_axes;  // one per dimension ("embed", "mlp", ...), may be empty
  ParameterInit init;
  bool weight_decay = true;  // false for norms and biases
};

class ParameterStore {
 public:
  // Lays the parameters out in order. Names must be unique and shapes non-negative with a
  // checked element count; otherwise an InvalidArgument naming the parameter.
  explicit ParameterStore(std::vector<ParameterSpec> specs);

  [[nodiscard]] const std::vector<ParameterSpec>& specs() const { return specs_; }
  // Elements of all parameters, and of the buffers (with the padding pad_to_multiple adds).
  [[nodiscard]] std::size_t parameter_elements() const { return parameter_elements_; }
  [[nodiscard]] std::size_t size() const { return values_.size(); }
  // Pads both buffers with zeros to a multiple of `n` elements, so that n ranks can own equal
  // contiguous chunks (ZeRO's flat partition). The padding belongs to no parameter.
  void pad_to_multiple(std::size_t n);

  // The parameter called `name` (an InvalidArgument naming it where there is none).
  [[nodiscard]] std::size_t index_of(const std::string& name) const;
  [[nodiscard]] std::size_t offset(std::size_t index) const { return offsets_[index]; }
  [[nodiscard]] std::size_t count(std::size_t index) const { return counts_[index]; }

  [[nodiscard]] std::span<float> values() { return values_; }
  [[nodiscard]] std::span<const float> values() const { return values_; }
  [[nodiscard]] std::span<float> grads() { return grads_; }
  [[nodiscard]] std::span<const float> grads() const { return grads_; }
  [[nodiscard]] float* value(std::size_t index) { return values_.data() + offsets_[index]; }
  [[nodiscard]] float* grad(std::size_t index) { return grads_.data() + offsets_[index]; }

  // Fills every parameter from its init rule, the seed and each element's global index.
  void initialize(std::uint64_t seed);
  void zero_grads();

 private:
  std::vector<ParameterSpec> specs_;
  std::vector<std::size_t> offsets_;
  std::vector<std::size_t> counts_;
  std::size_t parameter_elements_ = 0;
  std::vector<float> values_;
  std::vector<float> grads_;
};

// The value a normal(0, 1) draw takes for element `index` of parameter `name` under `seed`:
// a counter-based generator, so any rank computes any element without the others.
[[nodiscard]] float standard_normal_at(std::uint64_t seed, const std::string& name,
                                       std::uint64_t index);

}  // namespace shardwise::train

#pragma once
// A transformer generating one sequence on one rank (train::Decoder): the chunk's parts run for
// the new positions only, attention through each layer's key/value cache (the attention part's
// decode), every other part as in training; on a model axis each rank computes its heads, its
// share of the MLP and of the vocabulary, and every rank ends with the whole vocabulary's logits.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attention_part.hpp"
#include "embedding_part.hpp"
#include "mlp_part.hpp"
#include "model_axis.hpp"
#include "norm_part.hpp"
#include "shardwise/train/decoder.hpp"
#include "shardwise/train/transformer_spec.hpp"

namespace shardwise::train::transformer {

class TransformerDecoder final : public Decoder {
 public:
  // `capacity` 0 caches the whole context; more, or a vocabulary the model degree does not
  // divide, is an InvalidArgument.
  TransformerDecoder(const TransformerSpec& spec, const ModelDefinition& model,
                     ParameterStore& store, const TensorParallel& tensor_parallel,
                     std::size_t capacity, Precision precision);

  void forward(std::span<const std::int32_t> tokens, std::span<float> logits) override;
  [[nodiscard]] std::size_t length() const override { return length_; }
  [[nodiscard]] std::size_t capacity() const override { return capacity_; }
  [[nodiscard]] std::size_t vocab_size() const override { return spec_.shape.vocab; }
  void reset() override { length_ = 0; }
  [[nodiscard]] std::size_t cache_bytes() const override;

 private:
  void size_scratch(std::size_t rows);
  // The new positions' layers, their keys and values appended to the caches, and this rank's
  // logits of the last one.
  void compute(const std::int32_t* tokens, std::size_t rows, std::size_t first_position);
  [[nodiscard]] ParameterView parameters(std::size_t first) const {
    return ParameterView(store_, index_, first, axis_.products().precision());
  }

  TransformerSpec spec_;
  TransformerParameterLayout places_;
  ParameterStore& store_;
  std::vector<std::size_t> index_;
  ModelAxis axis_;
  ExpertParallel experts_;  // a Mixture of Experts' experts, folded over the model axis
  NormPart norm_;
  AttentionPart attention_;
  MlpPart mlp_;
  EmbeddingPart embedding_;
  std::size_t capacity_ = 0, length_ = 0;
  std::vector<float> keys_, values_;  // per layer, capacity x this rank's key/value width
  std::vector<float> x_, normed_, statistics_, queries_, attention_out_, qk_statistics_, projected_,
      mlp_arrays_, router_;
  std::vector<float> local_logits_;  // this rank's share of the vocabulary
};

}  // namespace shardwise::train::transformer

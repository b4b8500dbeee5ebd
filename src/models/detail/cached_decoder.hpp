#pragma once
// What every family's decoder shares (train/decoder.hpp): the cache's length and capacity, the
// checks of a call before anything is computed, and the vocabulary-parallel head's logits made
// whole on every model rank. A family computes its layers for the new positions and this rank's
// logits of the last one.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shardwise/train/decoder.hpp"
#include "shardwise/train/tensor_parallel.hpp"

namespace shardwise::models::detail {

class CachedDecoder : public train::Decoder {
 public:
  void forward(std::span<const std::int32_t> tokens, std::span<float> logits) final;
  [[nodiscard]] std::size_t length() const final { return length_; }
  [[nodiscard]] std::size_t capacity() const final { return capacity_; }
  [[nodiscard]] std::size_t vocab_size() const final { return vocab_; }
  void reset() final { length_ = 0; }

 protected:
  // `capacity` 0 caches the whole context; more is an InvalidArgument.
  CachedDecoder(train::TensorParallel tensor_parallel, std::size_t vocab, std::size_t context,
                std::size_t capacity);
  // The new positions' layers (`rows` tokens, the first at `first_position`), their keys and
  // values appended to the caches, and this rank's logits of the last position (vocab / t).
  virtual void compute(const std::int32_t* tokens, std::size_t rows, std::size_t first_position,
                       float* local_logits) = 0;

  [[nodiscard]] const train::TensorParallel& tp() const { return tp_; }
  [[nodiscard]] std::size_t vocab_local() const { return vocab_local_; }
  [[nodiscard]] std::size_t vocab_start() const { return vocab_start_; }
  [[nodiscard]] std::size_t local_logits_bytes() const { return local_.size() * sizeof(float); }

 private:
  train::TensorParallel tp_;
  std::size_t vocab_ = 0;
  std::size_t vocab_local_ = 0;
  std::size_t vocab_start_ = 0;
  std::size_t capacity_ = 0;
  std::size_t length_ = 0;
  std::vector<float> local_;
};

}  // namespace shardwise::models::detail

#pragma once
// One rank's part of a model generating one sequence, position by position, with a key/value
// cache per layer (as transformers' DynamicCache and llm.c's inference keep them): each call
// computes only the positions it is given, attending to every position cached before, so a new
// token costs one position, not the whole prefix. On a model axis every rank computes its heads
// and its part of the MLP and the vocabulary, as training splits them (Megatron-LM's layers,
// ModelDefinition::model_placements and shared_rows), and every rank ends with the whole
// vocabulary's logits.

#include <cstddef>
#include <cstdint>
#include <span>

namespace shardwise::train {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Appends `tokens` at positions [length(), length() + tokens.size()) and writes the logits of
  // the last of them over the whole vocabulary into `logits` (vocab_size() floats). Collective
  // over the model axis: every rank passes the same tokens. InvalidArgument where the positions
  // would pass the cache's length or a token is outside the vocabulary (nothing is appended).
  virtual void forward(std::span<const std::int32_t> tokens, std::span<float> logits) = 0;
  // Positions cached.
  [[nodiscard]] virtual std::size_t length() const = 0;
  // The most positions it caches: the model's context, or less where asked.
  [[nodiscard]] virtual std::size_t capacity() const = 0;
  [[nodiscard]] virtual std::size_t vocab_size() const = 0;
  // Forgets every cached position.
  virtual void reset() = 0;
  // Bytes of the cache and the scratch of one call, on this rank.
  [[nodiscard]] virtual std::size_t cache_bytes() const = 0;
};

}  // namespace shardwise::train

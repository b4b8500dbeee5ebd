// The checks and the head's gather every family's decoder shares (detail/cached_decoder.hpp).
#include "detail/cached_decoder.hpp"

#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::models::detail {

CachedDecoder::CachedDecoder(train::TensorParallel tensor_parallel, std::size_t vocab,
                             std::size_t context, std::size_t capacity)
    : tp_(tensor_parallel), vocab_(vocab) {
  const auto t = static_cast<std::size_t>(tp_.degree());
  if (vocab % t != 0) {
    throw InvalidArgument("a decoder over " + std::to_string(t) + " model ranks: the vocabulary (" +
                          std::to_string(vocab) + ") must be a multiple of them");
  }
  if (capacity > context) {
    throw InvalidArgument("a decoder caching " + std::to_string(capacity) +
                          " positions; the model's context is " + std::to_string(context));
  }
  capacity_ = capacity == 0 ? context : capacity;
  vocab_local_ = vocab / t;
  vocab_start_ = static_cast<std::size_t>(tp_.rank()) * vocab_local_;
  local_.resize(vocab_local_);
}

void CachedDecoder::forward(std::span<const std::int32_t> tokens, std::span<float> logits) {
  if (tokens.empty()) throw InvalidArgument("a decoder's forward of no tokens");
  if (tokens.size() > capacity_ - length_) {
    throw InvalidArgument("a decoder's forward of " + std::to_string(tokens.size()) +
                          " positions after " + std::to_string(length_) + "; it caches " +
                          std::to_string(capacity_));
  }
  if (logits.size() != vocab_) {
    throw InvalidArgument("a decoder's logits of " + std::to_string(logits.size()) +
                          " values; the vocabulary has " + std::to_string(vocab_));
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= vocab_) {
      throw InvalidArgument("token " + std::to_string(i) + " is " + std::to_string(tokens[i]) +
                            ", outside the model's vocabulary of " + std::to_string(vocab_));
    }
  }
  compute(tokens.data(), tokens.size(), length_, local_.data());
  tp_.gather(logits.data(), local_.data(), vocab_local_);
  length_ += tokens.size();
}

}  // namespace shardwise::models::detail

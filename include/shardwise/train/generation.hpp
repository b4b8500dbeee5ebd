#pragma once
// Text generation from a Decoder (decoder.hpp), as transformers' generate() and nanoGPT's
// sample.py do it: the prompt in one call (prefill), then one position per new token. Each
// token is the most likely (greedy: temperature 0, the lowest id among equal logits, as
// torch.argmax) or drawn from the softmax of logits / temperature, cut to the top_k most likely
// and then to the fewest most likely whose probability reaches top_p (transformers' order of its
// warpers). Draws come from a generator of the seed alone, so one seed gives one text on every
// layout; on a model axis model rank 0's choice is every rank's.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "shardwise/train/decoder.hpp"
#include "shardwise/train/setting_names.hpp"
#include "shardwise/train/tensor_parallel.hpp"

namespace shardwise::train {

struct SamplingOptions {
  double temperature = 0;  // 0: greedy
  std::size_t top_k = 0;   // 0: every token
  double top_p = 1;        // 1: every token
  std::uint64_t seed = 0;
};

// InvalidArgument naming the setting as `named` names it (temperature, top_p) where the
// temperature is negative or not finite, or top_p is outside (0, 1].
void validate(const SamplingOptions& options, const SettingNames& named = {});

// Picks tokens from logits as the options say; each draw advances the generator.
class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& options);
  // The next token of `logits` (the whole vocabulary). InvalidArgument where a logit is NaN or
  // every one is -inf.
  [[nodiscard]] std::int32_t next(std::span<const float> logits);

 private:
  [[nodiscard]] double uniform();  // [0, 1), 53 random bits
  SamplingOptions options_;
  std::uint64_t state_ = 0;
  std::vector<std::int32_t> order_;
  std::vector<double> probs_;
};

struct GenerationOptions {
  std::size_t max_new_tokens = 64;
  SamplingOptions sampling;
  // Ids that end the text once generated (end-of-text); the id is kept as the last token.
  std::vector<std::int32_t> stop_tokens;
  // Hears each new token as it is chosen (on every rank).
  std::function<void(std::int32_t)> on_token;
};

enum class StopReason { kMaxNewTokens, kStopToken, kContext };
// "max-new-tokens", "stop-token", "context".
[[nodiscard]] std::string to_string(StopReason reason);

struct GenerationResult {
  std::vector<std::int32_t> tokens;  // the new ones
  StopReason stop = StopReason::kMaxNewTokens;
  std::size_t prompt_tokens = 0;
  double prefill_seconds = 0;  // the prompt's forward, which gives the first new token
  double decode_seconds = 0;   // every later token's forward
  // Tokens after the first per second of decoding (0 where there were none).
  [[nodiscard]] double decode_tokens_per_second() const;
};

// Continues `prompt` (at least one token) from an empty decoder. Collective over the model axis
// `tensor_parallel` spans: every rank passes the same prompt and options. Stops after
// max_new_tokens, at a stop token, or where the decoder's cache is full. InvalidArgument where
// the prompt is empty or fills the cache already.
[[nodiscard]] GenerationResult generate(Decoder& decoder, const TensorParallel& tensor_parallel,
                                        std::span<const std::int32_t> prompt,
                                        const GenerationOptions& options);

}  // namespace shardwise::train

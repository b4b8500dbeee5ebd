#include "shardwise/train/generation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <sstream>

#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

void validate(const SamplingOptions& options, const SettingNames& named) {
  if (!std::isfinite(options.temperature) || options.temperature < 0) {
    throw InvalidArgument(named("temperature") + " is " + number(options.temperature) +
                          "; expected a finite number >= 0 (0: greedy)");
  }
  if (!(options.top_p > 0 && options.top_p <= 1)) {
    throw InvalidArgument(named("top_p") + " is " + number(options.top_p) +
                          "; expected a number in (0, 1]");
  }
}

TokenSampler::TokenSampler(const SamplingOptions& options) : options_(options) {
  validate(options_);
  state_ = options_.seed;
}

double TokenSampler::uniform() {
  // SplitMix64 (Steele, Lea and Flood 2014): the same draws on every machine and library.
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

std::int32_t TokenSampler::next(std::span<const float> logits) {
  if (logits.empty()) throw InvalidArgument("sampling from no logits");
  std::size_t best = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      throw InvalidArgument("logit " + std::to_string(i) +
                            " is NaN: the model's values are not finite");
    }
    if (logits[i] > logits[best]) best = i;
  }
  if (std::isinf(logits[best]) && logits[best] < 0) {
    throw InvalidArgument("every logit is -inf: no token can be drawn");
  }
  if (options_.temperature == 0) return static_cast<std::int32_t>(best);
  // The tokens from the most likely down (the lower id first among equals), their
  // probabilities in double.
  order_.resize(logits.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  std::size_t kept = logits.size();
  if (options_.top_k > 0) kept = std::min(kept, options_.top_k);
  probs_.resize(kept);
  const double largest = logits[best];
  double sum = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    probs_[i] = std::exp((static_cast<double>(logits[order_[i]]) - largest) / options_.temperature);
    sum += probs_[i];
  }
  if (options_.top_p < 1) {
    // The fewest most likely tokens whose probability reaches top_p (at least one).
    double cumulative = 0;
    std::size_t nucleus = 0;
    while (nucleus < kept) {
      cumulative += probs_[nucleus++] / sum;
      if (cumulative >= options_.top_p) break;
    }
    kept = nucleus;
    sum = std::accumulate(probs_.begin(), probs_.begin() + static_cast<std::ptrdiff_t>(kept), 0.0);
  }
  const double target = uniform() * sum;
  double cumulative = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return order_[i];
  }
  return order_[kept - 1];  // rounding left the draw past the last sum
}

std::string to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kMaxNewTokens: return "max-new-tokens";
    case StopReason::kStopToken: return "stop-token";
    case StopReason::kContext: return "context";
  }
  return "unknown";
}

double GenerationResult::decode_tokens_per_second() const {
  if (tokens.size() < 2 || decode_seconds <= 0) return 0;
  return static_cast<double>(tokens.size() - 1) / decode_seconds;
}

GenerationResult generate(Decoder& decoder, const TensorParallel& tensor_parallel,
                          std::span<const std::int32_t> prompt, const GenerationOptions& options) {
  if (prompt.empty()) throw InvalidArgument("the prompt is empty: generation needs a token");
  if (prompt.size() >= decoder.capacity()) {
    throw InvalidArgument("the prompt has " + std::to_string(prompt.size()) +
                          " tokens; the model's context of " + std::to_string(decoder.capacity()) +
                          " leaves no room for a new one");
  }
  TokenSampler sampler(options.sampling);
  decoder.reset();
  GenerationResult result;
  result.prompt_tokens = prompt.size();
  if (options.max_new_tokens == 0) return result;
  std::vector<float> logits(decoder.vocab_size());
  auto start = std::chrono::steady_clock::now();
  decoder.forward(prompt, logits);
  result.prefill_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  while (true) {
    std::int32_t token = sampler.next(logits);
    tensor_parallel.share_first(&token, 1);
    result.tokens.push_back(token);
    if (options.on_token) options.on_token(token);
    if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) !=
        options.stop_tokens.end()) {
      result.stop = StopReason::kStopToken;
      break;
    }
    if (result.tokens.size() >= options.max_new_tokens) {
      result.stop = StopReason::kMaxNewTokens;
      break;
    }
    if (decoder.length() >= decoder.capacity()) {
      result.stop = StopReason::kContext;
      break;
    }
    decoder.forward({&token, 1}, logits);
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace shardwise::train

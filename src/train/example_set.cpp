#include "shardwise/train/example_set.hpp"

#include <algorithm>
#include <string_view>

#include "detail/splitmix.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/cross_entropy.hpp"

namespace shardwise::train {
namespace {

// A bijection of [0, n) keyed by `key`: four Feistel rounds over the smallest even number of bits
// that holds n, walked again while the result lands at n or above (at most a few times: the
// domain is under 4n). Any rank finds any row's example from its index alone.
std::uint64_t permuted(std::uint64_t index, std::uint64_t n, std::uint64_t key) {
  unsigned half = 1;
  while (half < 32 && (std::uint64_t{1} << (2 * half)) < n) ++half;
  const std::uint64_t mask = (std::uint64_t{1} << half) - 1;
  std::uint64_t x = index;
  do {
    std::uint64_t left = x >> half;
    std::uint64_t right = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint64_t mixed = detail::splitmix64(key ^ (round << 56) ^ right) & mask;
      const std::uint64_t next = left ^ mixed;
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

}  // namespace

void ExampleSet::add(std::span<const std::int32_t> tokens, std::span<const std::uint8_t> counted) {
  if (tokens.size() != counted.size()) {
    throw InvalidArgument(name_ + ": an example of " + std::to_string(tokens.size()) +
                          " tokens was given " + std::to_string(counted.size()) + " marks");
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  counted_.insert(counted_.end(), counted.begin(), counted.end());
  if (!counted.empty()) counted_[starts_.back()] = 0;  // the first token is nobody's target
  starts_.push_back(tokens_.size());
}

std::span<const std::int32_t> ExampleSet::tokens(std::size_t example) const {
  return std::span<const std::int32_t>(tokens_).subspan(starts_.at(example),
                                                        starts_.at(example + 1) - starts_[example]);
}

std::span<const std::uint8_t> ExampleSet::counted(std::size_t example) const {
  return std::span<const std::uint8_t>(counted_).subspan(
      starts_.at(example), starts_.at(example + 1) - starts_[example]);
}

std::uint64_t ExampleSet::fingerprint() const {
  std::uint64_t hash = detail::splitmix64(size() ^ (total_tokens() << 20));
  const auto bytes = [](const auto& values) {
    return std::string_view(reinterpret_cast<const char*>(values.data()),
                            values.size() * sizeof(values[0]));
  };
  hash = detail::splitmix64(hash ^ detail::fnv1a(bytes(tokens_)));
  hash = detail::splitmix64(hash ^ detail::fnv1a(bytes(counted_)));
  return detail::splitmix64(hash ^ detail::fnv1a(bytes(starts_)));
}

ExampleRows::ExampleRows(const ExampleSet& examples, std::size_t first, std::size_t end,
                         std::size_t seq, std::size_t vocab)
    : examples_(&examples), seq_(seq) {
  if (seq < 1) throw InvalidArgument("rows of 0 positions hold no example");
  for (std::size_t e = first; e < end; ++e) {
    const std::span<const std::int32_t> tokens = examples.tokens(e);
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t] < 0 || static_cast<std::size_t>(tokens[t]) >= vocab) {
        throw InvalidArgument(examples.name() + ": example " + std::to_string(e + 1) + "'s token " +
                              std::to_string(t) + " is the id " + std::to_string(tokens[t]) +
                              ", outside the model's vocabulary 0.." + std::to_string(vocab - 1));
      }
    }
    const std::size_t length = std::min(tokens.size(), seq + 1);
    if (tokens.size() > seq + 1) ++cut_;
    const std::span<const std::uint8_t> counted = examples.counted(e).first(length);
    const auto targets = static_cast<std::size_t>(std::count(counted.begin(), counted.end(), 1));
    if (targets == 0) {
      ++left_out_;
      continue;
    }
    kept_.push_back(e);
    counted_.push_back(targets);
    tokens_ += length;
  }
  if (kept_.empty()) {
    const std::size_t count = end - first;
    const bool part = first > 0 || end < examples.size();
    const std::string which =
        part ? "examples " + std::to_string(first + 1) + " to " + std::to_string(end) + " of its " +
                   std::to_string(examples.size())
             : "its " + std::to_string(count) + " example" + (count == 1 ? "" : "s");
    throw InvalidArgument(examples.name() + ": " + which + (count == 1 ? " has" : " have") +
                          " no counted token (a completion, an assistant's turn) within the "
                          "first " +
                          std::to_string(seq + 1) + " tokens");
  }
}

double ExampleRows::padding_share() const {
  double padded = 0;
  for (const std::size_t e : kept_) {
    padded += static_cast<double>(seq_ + 1 - std::min(examples_->tokens(e).size(), seq_ + 1));
  }
  return padded / (static_cast<double>(kept_.size()) * static_cast<double>(seq_));
}

std::size_t ExampleRows::kept_of(std::uint64_t index, bool shuffled, std::uint64_t seed) const {
  const std::uint64_t n = kept_.size();
  const std::uint64_t epoch = index / n;
  const std::uint64_t within = index % n;
  if (!shuffled) return within;
  const std::uint64_t key = detail::splitmix64(detail::splitmix64(seed ^ 0x6578616dULL) ^ epoch);
  return permuted(within, n, key);
}

void ExampleRows::append_row(std::uint64_t index, bool shuffled, std::uint64_t seed,
                             std::vector<std::int32_t>& tokens,
                             std::vector<std::int32_t>& targets) const {
  const std::size_t e = kept_[kept_of(index, shuffled, seed)];
  const std::span<const std::int32_t> ids = examples_->tokens(e);
  const std::span<const std::uint8_t> counted = examples_->counted(e);
  const std::size_t positions = std::min(ids.size(), seq_ + 1) - 1;
  for (std::size_t t = 0; t < seq_; ++t) {
    // Padding reads token 0: its positions compute what nobody reads.
    tokens.push_back(t < positions ? ids[t] : 0);
    targets.push_back(t < positions && counted[t + 1] != 0 ? ids[t + 1] : kernels::kIgnoredTarget);
  }
}

std::size_t ExampleRows::counted_targets(std::uint64_t index, bool shuffled,
                                         std::uint64_t seed) const {
  return counted_[kept_of(index, shuffled, seed)];
}

}  // namespace shardwise::train

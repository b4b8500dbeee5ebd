#include "shardwise/train/corpus.hpp"

#include "detail/splitmix.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
Corpus::Corpus(std::string text, std::size_t seq) : bytes_(std::move(text)) {
  split_ = bytes_.size() - bytes_.size() / 10;
  if (seq < 1 || split_ < seq + 1 || bytes_.size() - split_ < seq + 1) {
    throw InvalidArgument("the data has " + std::to_string(bytes_.size()) +
                          " bytes; sequences of " + std::to_string(seq) + " tokens need at least " +
                          std::to_string(10 * (seq + 1)) + " (a tenth is held out)");
  }
}

std::uint64_t Corpus::fingerprint() const { return detail::fnv1a(bytes_); }

Corpus Corpus::builtin(std::size_t seq) {
  // Counting sentences: regular enough to learn fast, varied enough that the loss shows it.
  static const char* const kNames[] = {"one", "two",   "three", "four", "five",
                                       "six", "seven", "eight", "nine", "ten"};
  static const char* const kThings[] = {"cats", "ships", "stars", "bells", "trees"};
  std::string text;
  for (int round = 0; text.size() < 20 * seq + 60000; ++round) {
    for (int n = 0; n < 10; ++n) {
      text += kNames[n];
      text += ' ';
      text += kThings[(round + n) % 5];
      text += n == 9 ? ".\n" : ", ";
    }
  }
  return Corpus(text, seq);
}

TokenBatch Corpus::batch(Split split, std::uint64_t seed, std::uint64_t step, std::size_t first,
                         std::size_t count, std::size_t seq) const {
  const std::size_t begin = split == Split::kTrain ? 0 : split_;
  const std::size_t length = (split == Split::kTrain ? split_ : bytes_.size()) - begin;
  // A sequence and its next token must fit in the split, with room to start at more than one
  // place.
  if (seq < 1 || length < seq + 1) {
    throw InvalidArgument("sequences of " + std::to_string(seq) + " tokens do not fit in the " +
                          std::to_string(length) + " bytes of the " +
                          (split == Split::kTrain ? "training" : "held-out") + " data");
  }
  TokenBatch out;
  out.sequences = count;
  out.seq = seq;
  out.tokens.reserve(count * seq);
  out.targets.reserve(count * seq);
  for (std::size_t s = first; s < first + count; ++s) {
    // Where sequence s of this step starts: the same on every rank and mesh.
    const std::uint64_t stream = split == Split::kTrain ? 0x7472ULL : 0x76616cULL;
    const std::uint64_t draw =
        detail::splitmix64(detail::splitmix64(seed ^ stream) ^ detail::splitmix64(step) ^ s);
    const std::size_t start = begin + static_cast<std::size_t>(draw % (length - seq));
    for (std::size_t t = 0; t < seq; ++t) {
      out.tokens.push_back(static_cast<unsigned char>(bytes_[start + t]));
      out.targets.push_back(static_cast<unsigned char>(bytes_[start + t + 1]));
    }
  }
  return out;
}

}  // namespace shardwise::train

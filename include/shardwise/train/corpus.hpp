#pragma once
// Byte-level training data: the bytes of a text are its tokens (vocabulary 256). The last tenth
// is held out for validation. Batches are a function of the step, the seed and the split alone,
// so every mesh trains on the same tokens; a rank takes its part of the global batch.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardwise::train {

struct TokenBatch {
  std::vector<std::int32_t> tokens;   // (sequences, seq)
  std::vector<std::int32_t> targets;  // the next token of each
  std::size_t sequences = 0;
  std::size_t seq = 0;
};

class Corpus {
 public:
  // The bytes of `text`; InvalidArgument when it is too short for one sequence of `seq`
  // tokens in both splits.
  Corpus(std::string text, std::size_t seq);
  // A deterministic built-in text with structure a small model learns within a few hundred
  // steps.
  static Corpus builtin(std::size_t seq);

  [[nodiscard]] std::size_t train_tokens() const { return split_; }
  [[nodiscard]] std::size_t val_tokens() const { return bytes_.size() - split_; }
  // A hash of the text (FNV-1a), the same in every process that holds the same bytes.
  [[nodiscard]] std::uint64_t fingerprint() const;

  enum class Split { kTrain, kValidation };
  // Sequences [first, first + count) of the global batch of `step`: sequence s starts at a
  // position drawn from (seed, split, step, s) alone. An InvalidArgument where `seq` tokens and
  // their targets do not fit in the split.
  [[nodiscard]] TokenBatch batch(Split split, std::uint64_t seed, std::uint64_t step,
                                 std::size_t first, std::size_t count, std::size_t seq) const;

 private:
  std::string bytes_;
  std::size_t split_ = 0;  // where the held-out tail starts
};

}  // namespace shardwise::train

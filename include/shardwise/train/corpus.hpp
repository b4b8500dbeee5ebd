#pragma once
// Training data: tokens from a TokenSource (bytes of a text, or a token file of any size), the
// held-out part either a validation source of its own or the last tenth; or fine-tuning examples
// (train/example_set.hpp), one a batch row, the loss counted where they say. Batches are a
// function of the step, the seed and the split alone, so every mesh trains on the same tokens; a
// rank takes its part of the global batch. Every id a batch draws is checked against the model's
// vocabulary, naming where it lies: a token file of tens of GiB is never read whole.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/train/example_set.hpp"
#include "shardwise/train/token_source.hpp"

namespace shardwise::train {

struct TokenBatch {
  std::vector<std::int32_t> tokens;   // (sequences, seq)
  std::vector<std::int32_t> targets;  // the next token of each, or kernels::kIgnoredTarget
  std::size_t sequences = 0;
  std::size_t seq = 0;
};

class Corpus {
 public:
  // Training tokens from `data`, held-out ones from `validation` (or, where it is null, the last
  // tenth of `data`), ids below `vocab`. InvalidArgument naming the source when a split is too
  // short for one sequence of `seq` tokens and its targets.
  Corpus(std::shared_ptr<const TokenSource> data, std::shared_ptr<const TokenSource> validation,
         std::size_t seq, std::size_t vocab);
  // Fine-tuning examples, as rows of `seq` positions (ExampleRows); the held-out ones from
  // `validation` or, where it is null, the last tenth of `examples` (at least one). InvalidArgument
  // naming the set where a split has no example with a counted token, or an id is outside `vocab`.
  Corpus(std::shared_ptr<const ExampleSet> examples, std::shared_ptr<const ExampleSet> validation,
         std::size_t seq, std::size_t vocab);
  // The bytes of `text`, a tenth held out, vocabulary 256.
  Corpus(std::string text, std::size_t seq);
  // A deterministic built-in text with structure a small model learns within a few hundred
  // steps.
  static Corpus builtin(std::size_t seq);

  [[nodiscard]] std::size_t train_tokens() const { return train_end_; }
  [[nodiscard]] std::size_t val_tokens() const { return val_end_ - val_begin_; }
  // What a run's log says of examples: each split's examples, those cut to a row's length and
  // those left out, and the share of padding; empty for a token stream.
  [[nodiscard]] std::vector<std::string> notes() const;
  // Examples: the rows of each split (nullptr for a token stream).
  [[nodiscard]] const ExampleRows* train_rows() const { return train_rows_.get(); }
  [[nodiscard]] const ExampleRows* val_rows() const { return val_rows_.get(); }
  // The same in every process that holds the same data (TokenSource::fingerprint of each source).
  [[nodiscard]] std::uint64_t fingerprint() const;

  enum class Split { kTrain, kValidation };
  // Sequences [first, first + count) of the global batch of `step` (`global` sequences; training
  // steps count from 1, held-out batches from 0). A token stream's sequence s starts at a
  // position drawn from (seed, split, step, s) alone; examples are rows step x global + s of the
  // split's order. An InvalidArgument where `seq` tokens and their targets do not fit in the
  // split, or an id is outside the vocabulary (naming the source, the token's index and its byte).
  [[nodiscard]] TokenBatch batch(Split split, std::uint64_t seed, std::uint64_t step,
                                 std::size_t global, std::size_t first, std::size_t count,
                                 std::size_t seq) const;
  // What makes the models' mean over every position of the global batch the mean over its counted
  // targets (Model::forward_backward's loss_scale): positions / counted targets; 1 for a token
  // stream, whose every target counts.
  [[nodiscard]] float loss_scale(Split split, std::uint64_t seed, std::uint64_t step,
                                 std::size_t global, std::size_t seq) const;

 private:
  std::shared_ptr<const TokenSource> train_;
  std::shared_ptr<const TokenSource> val_;  // train_ itself when the tail is held out
  std::size_t train_end_ = 0;               // training tokens: [0, train_end_) of train_
  std::size_t val_begin_ = 0;               // held-out tokens: [val_begin_, val_end_) of val_
  std::size_t val_end_ = 0;
  std::size_t vocab_ = 256;
  // Examples instead of a token stream: the sets, and each split's rows.
  std::shared_ptr<const ExampleSet> train_examples_;
  std::shared_ptr<const ExampleSet> val_examples_;
  std::shared_ptr<const ExampleRows> train_rows_;
  std::shared_ptr<const ExampleRows> val_rows_;
  std::size_t rows_seq_ = 0;
};

}  // namespace shardwise::train

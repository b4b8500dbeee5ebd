#pragma once
// Fine-tuning examples: separate token sequences (a conversation, a prompt and its completion, a
// document), each token marked counted where the loss is taken on predicting it (an assistant's
// turn, a completion) and not counted elsewhere (the prompt, the user's turns), as TRL's
// completion and assistant masks mark them.
//
// A batch row holds one example, cut to the row's length and padded after its end: the padding's
// targets, and those of tokens not counted, are kernels::kIgnoredTarget. Attention is causal, so
// padding after an example changes nothing the example's positions compute (no mask in the
// attention kernels is needed, and every layout computes what one rank does); the price is the
// padded positions' compute, which docs/fine-tuning.md measures.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardwise::train {

class ExampleSet {
 public:
  explicit ExampleSet(std::string name) : name_(std::move(name)) {}

  // Appends an example: `tokens`, and for each whether predicting it counts (counted[0] is never
  // a target: the first token has nothing before it). InvalidArgument where the sizes differ.
  void add(std::span<const std::int32_t> tokens, std::span<const std::uint8_t> counted);

  [[nodiscard]] std::size_t size() const { return starts_.size() - 1; }
  [[nodiscard]] std::span<const std::int32_t> tokens(std::size_t example) const;
  [[nodiscard]] std::span<const std::uint8_t> counted(std::size_t example) const;
  [[nodiscard]] std::size_t total_tokens() const { return tokens_.size(); }
  // "--data 'chat.jsonl'", for messages.
  [[nodiscard]] const std::string& name() const { return name_; }
  // The same for the same examples in every process.
  [[nodiscard]] std::uint64_t fingerprint() const;

 private:
  std::string name_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::uint8_t> counted_;
  std::vector<std::size_t> starts_{0};  // example i is [starts_[i], starts_[i + 1])
};

// The examples of a split as batch rows of `seq` positions: example e's first min(n, seq + 1)
// tokens give positions [0, min(n, seq + 1) - 1) (the rest padded); an example that leaves no
// counted target in that length is left out (counted in left_out()). Rows are drawn in an order
// shuffled per epoch from the seed (training) or in file order (held-out).
class ExampleRows {
 public:
  // InvalidArgument naming the set where no example is left, or a token is outside `vocab`.
  ExampleRows(const ExampleSet& examples, std::size_t first, std::size_t end, std::size_t seq,
              std::size_t vocab);

  [[nodiscard]] std::size_t size() const { return kept_.size(); }
  [[nodiscard]] std::size_t left_out() const { return left_out_; }
  [[nodiscard]] std::size_t cut() const { return cut_; }  // examples longer than a row
  // The tokens of the kept examples as rows hold them (cut to seq + 1).
  [[nodiscard]] std::size_t tokens() const { return tokens_; }
  // The rows' positions that are padding, as a share of all, over one pass of the examples.
  [[nodiscard]] double padding_share() const;

  // Row `index` (any size: the order wraps around per epoch) appended to tokens and targets.
  void append_row(std::uint64_t index, bool shuffled, std::uint64_t seed,
                  std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const;
  // The counted targets of row `index`.
  [[nodiscard]] std::size_t counted_targets(std::uint64_t index, bool shuffled,
                                            std::uint64_t seed) const;

 private:
  // Row `index`'s place in kept_.
  [[nodiscard]] std::size_t kept_of(std::uint64_t index, bool shuffled, std::uint64_t seed) const;
  const ExampleSet* examples_;
  std::size_t seq_;
  std::vector<std::size_t> kept_;     // examples in the split with a counted target
  std::vector<std::size_t> counted_;  // each kept example's counted targets within a row
  std::size_t left_out_ = 0;
  std::size_t cut_ = 0;
  std::size_t tokens_ = 0;
};

}  // namespace shardwise::train

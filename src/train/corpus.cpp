#include "shardwise/train/corpus.hpp"

#include <algorithm>
#include <limits>

#include "detail/splitmix.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

// "--data 'a.bin': token 11 (byte 22) is the id 300, outside the model's vocabulary 0..255"
InvalidArgument id_outside(const TokenSource& source, std::size_t token, std::int32_t id,
                           std::size_t vocab) {
  const std::size_t byte = source.byte_of(token);
  return InvalidArgument(
      source.name() + ": token " + std::to_string(token) +
      (byte == TokenSource::kNoByte ? "" : " (byte " + std::to_string(byte) + ")") + " is the id " +
      (id < 0 ? std::string("above 2^31") : std::to_string(id)) +
      ", outside the model's vocabulary 0.." + std::to_string(vocab - 1));
}

// Every id of `source` read once, before the first step draws any.
void check_ids(const TokenSource& source, std::size_t vocab) {
  if (const std::optional<std::size_t> bad = source.first_outside(vocab)) {
    std::int32_t id = 0;
    source.read(*bad, 1, &id);
    throw id_outside(source, *bad, id, vocab);
  }
}

}  // namespace

Corpus::Corpus(std::shared_ptr<const TokenSource> data,
               std::shared_ptr<const TokenSource> validation, std::size_t seq, std::size_t vocab)
    : train_(std::move(data)), val_(std::move(validation)), vocab_(vocab) {
  if (!train_) throw InvalidArgument("a corpus needs its training data");
  const std::size_t total = train_->size();
  if (val_) {
    train_end_ = total;
    val_begin_ = 0;
    val_end_ = val_->size();
  } else {
    val_ = train_;
    train_end_ = total - total / 10;
    val_begin_ = train_end_;
    val_end_ = total;
  }
  const auto too_short = [&](const TokenSource& source, std::size_t tokens, std::size_t needed) {
    return InvalidArgument(source.name() + " has " + std::to_string(tokens) +
                           " tokens; sequences of " + std::to_string(seq) +
                           " tokens need at least " + std::to_string(needed) +
                           (val_ == train_ ? " (a tenth is held out, and each part needs one "
                                             "sequence and its targets)"
                                           : " (one sequence and its targets)"));
  };
  if (seq < 1 || seq == std::numeric_limits<std::size_t>::max()) {
    throw InvalidArgument("sequences of " + std::to_string(seq) + " tokens cannot be drawn");
  }
  if (val_ == train_) {
    if (val_end_ - val_begin_ < seq + 1) {
      const std::size_t needed = (seq + 1) > std::numeric_limits<std::size_t>::max() / 10
                                     ? std::numeric_limits<std::size_t>::max()
                                     : 10 * (seq + 1);
      throw too_short(*train_, total, needed);
    }
  } else {
    if (train_end_ < seq + 1) throw too_short(*train_, train_end_, seq + 1);
    if (val_end_ < seq + 1) throw too_short(*val_, val_end_, seq + 1);
  }
  check_ids(*train_, vocab_);
  if (val_ != train_) check_ids(*val_, vocab_);
}

Corpus::Corpus(std::shared_ptr<const ExampleSet> examples,
               std::shared_ptr<const ExampleSet> validation, std::size_t seq, std::size_t vocab)
    : vocab_(vocab),
      train_examples_(std::move(examples)),
      val_examples_(std::move(validation)),
      rows_seq_(seq) {
  if (!train_examples_) throw InvalidArgument("a corpus needs its training examples");
  const std::size_t n = train_examples_->size();
  if (val_examples_) {
    train_rows_ = std::make_shared<ExampleRows>(*train_examples_, 0, n, seq, vocab);
    val_rows_ = std::make_shared<ExampleRows>(*val_examples_, 0, val_examples_->size(), seq, vocab);
    train_end_ = train_rows_->tokens();
    val_end_ = val_rows_->tokens();
    return;
  }
  if (n < 2) {
    throw InvalidArgument(train_examples_->name() + " has " + std::to_string(n) +
                          " examples; a tenth (at least one) is held out, and each part needs "
                          "one");
  }
  const std::size_t held_out = std::max<std::size_t>(1, n / 10);
  train_rows_ = std::make_shared<ExampleRows>(*train_examples_, 0, n - held_out, seq, vocab);
  val_rows_ = std::make_shared<ExampleRows>(*train_examples_, n - held_out, n, seq, vocab);
  train_end_ = train_rows_->tokens();
  val_end_ = val_rows_->tokens();
}

std::vector<std::string> Corpus::notes() const {
  if (!train_rows_) return {};
  std::vector<std::string> out;
  const auto describe = [&](const ExampleRows& rows, const char* split) {
    std::string line = std::to_string(rows.size()) + " " + split + " examples in rows of " +
                       std::to_string(rows_seq_) + " positions";
    if (rows.cut() > 0) {
      line += "; " + std::to_string(rows.cut()) + " longer than " + std::to_string(rows_seq_ + 1) +
              " tokens were cut";
    }
    if (rows.left_out() > 0) {
      line += "; " + std::to_string(rows.left_out()) +
              " with no counted token within that length were left out";
    }
    const auto padding = static_cast<int>(rows.padding_share() * 100.0 + 0.5);
    line += "; padding is " + std::to_string(padding) + "% of the positions";
    out.push_back(std::move(line));
  };
  describe(*train_rows_, "training");
  describe(*val_rows_, "held-out");
  return out;
}

Corpus::Corpus(std::string text, std::size_t seq)
    : Corpus(bytes_source(std::move(text), "the data"), nullptr, seq, 256) {}

std::uint64_t Corpus::fingerprint() const {
  if (train_examples_) {
    const std::uint64_t train = train_examples_->fingerprint() ^ rows_seq_;
    return val_examples_ ? detail::splitmix64(train ^ (val_examples_->fingerprint() << 1)) : train;
  }
  const std::uint64_t train = train_->fingerprint();
  return val_ == train_ ? train : detail::splitmix64(train ^ (val_->fingerprint() << 1));
}

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
  return Corpus(bytes_source(std::move(text), "the built-in corpus"), nullptr, seq, 256);
}

namespace {

// A split's row of examples for sequence s of a global batch: training steps count from 1.
std::uint64_t row_of(Corpus::Split split, std::uint64_t step, std::size_t global, std::size_t s) {
  const std::uint64_t batch = split == Corpus::Split::kTrain && step > 0 ? step - 1 : step;
  return batch * global + s;
}

}  // namespace

float Corpus::loss_scale(Split split, std::uint64_t seed, std::uint64_t step, std::size_t global,
                         std::size_t seq) const {
  if (!train_rows_) return 1.0F;
  const ExampleRows& rows = split == Split::kTrain ? *train_rows_ : *val_rows_;
  const bool shuffled = split == Split::kTrain;
  std::size_t counted = 0;
  for (std::size_t s = 0; s < global; ++s) {
    counted += rows.counted_targets(row_of(split, step, global, s), shuffled, seed);
  }
  // Every kept example has a counted target: counted is at least `global`.
  return static_cast<float>(static_cast<double>(global) * static_cast<double>(seq) /
                            static_cast<double>(counted));
}

TokenBatch Corpus::batch(Split split, std::uint64_t seed, std::uint64_t step, std::size_t global,
                         std::size_t first, std::size_t count, std::size_t seq) const {
  if (train_rows_) {
    if (seq != rows_seq_) {
      throw InvalidArgument("the examples were cut into rows of " + std::to_string(rows_seq_) +
                            " positions; asked for " + std::to_string(seq));
    }
    if (first + count > global) {
      throw InvalidArgument("sequences " + std::to_string(first) + " to " +
                            std::to_string(first + count) + " of a global batch of " +
                            std::to_string(global));
    }
    const ExampleRows& rows = split == Split::kTrain ? *train_rows_ : *val_rows_;
    TokenBatch out;
    out.sequences = count;
    out.seq = seq;
    out.tokens.reserve(count * seq);
    out.targets.reserve(count * seq);
    for (std::size_t s = first; s < first + count; ++s) {
      rows.append_row(row_of(split, step, global, s), split == Split::kTrain, seed, out.tokens,
                      out.targets);
    }
    return out;
  }
  (void)global;
  const TokenSource& source = split == Split::kTrain ? *train_ : *val_;
  const std::size_t begin = split == Split::kTrain ? 0 : val_begin_;
  const std::size_t length = (split == Split::kTrain ? train_end_ : val_end_) - begin;
  // A sequence and its next token must fit in the split, with room to start at more than one
  // place.
  if (seq < 1 || length < seq + 1) {
    throw InvalidArgument("sequences of " + std::to_string(seq) + " tokens do not fit in the " +
                          std::to_string(length) + " tokens of the " +
                          (split == Split::kTrain ? "training" : "held-out") + " data");
  }
  TokenBatch out;
  out.sequences = count;
  out.seq = seq;
  out.tokens.reserve(count * seq);
  out.targets.reserve(count * seq);
  std::vector<std::int32_t> window(seq + 1);
  for (std::size_t s = first; s < first + count; ++s) {
    // Where sequence s of this step starts: the same on every rank and mesh.
    const std::uint64_t stream = split == Split::kTrain ? 0x7472ULL : 0x76616cULL;
    const std::uint64_t draw =
        detail::splitmix64(detail::splitmix64(seed ^ stream) ^ detail::splitmix64(step) ^ s);
    const std::size_t start = begin + static_cast<std::size_t>(draw % (length - seq));
    source.read(start, seq + 1, window.data());
    for (std::size_t t = 0; t <= seq; ++t) {
      // Checked when the corpus was made; a file changed since is caught here.
      if (window[t] < 0 || static_cast<std::size_t>(window[t]) >= vocab_) {
        throw id_outside(source, start + t, window[t], vocab_);
      }
    }
    out.tokens.insert(out.tokens.end(), window.begin(),
                      window.begin() + static_cast<std::ptrdiff_t>(seq));
    out.targets.insert(out.targets.end(), window.begin() + 1, window.end());
  }
  return out;
}

}  // namespace shardwise::train

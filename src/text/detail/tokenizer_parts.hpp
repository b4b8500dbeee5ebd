#pragma once
// What a tokenizer.json is read into (tokenizer_json.cpp) and encodes and decodes with
// (tokenizer.cpp).

#include <cstddef>
#include <optional>
#include <vector>

#include "added_vocabulary.hpp"
#include "bpe_model.hpp"
#include "decoder.hpp"
#include "normalizer.hpp"
#include "post_processor.hpp"
#include "pre_tokenizer.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {

struct Tokenizer::Parts {
  // Applied to each piece between the added tokens with normalized=false; empty: none.
  std::vector<detail::NormalizerStep> normalizer;
  detail::AddedVocabulary added;
  std::vector<detail::PreTokenizerStep> pre_tokenizer;
  detail::BpeModel model;
  std::optional<detail::Template> post_template;
  // The decoder's steps; without a decoder (nullopt) the library joins the tokens with spaces,
  // with an empty Sequence it joins them as they are.
  std::optional<std::vector<detail::DecoderStep>> decoder;
  std::size_t vocab_size = 0;  // the model's and the added tokens', every id below it
  // No token of the model's vocabulary holds SentencePiece's space mark "▁" after a character
  // other than "▁" (pieces start at spaces, as SentencePiece's split_by_whitespace makes them):
  // no merge joins the text on both sides of a space, so a text can be cut before one
  // (tokenizer_cuts.cpp).
  bool spaces_start_pieces = false;
};

// Whether `tokens` hold no "▁" after another character than "▁".
[[nodiscard]] bool spaces_start_pieces(const detail::BpeModel& model);

}  // namespace shardwise::text

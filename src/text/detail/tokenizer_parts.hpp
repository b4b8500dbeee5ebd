#pragma once
// What a tokenizer.json is read into (tokenizer_json.cpp) and encodes and decodes with
// (tokenizer.cpp).

#include <cstddef>
#include <optional>
#include <vector>

#include "added_vocabulary.hpp"
#include "bpe_model.hpp"
#include "post_processor.hpp"
#include "pre_tokenizer.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {

struct Tokenizer::Parts {
  detail::AddedVocabulary added;
  std::vector<detail::PreTokenizerStep> pre_tokenizer;
  detail::BpeModel model;
  std::optional<detail::Template> post_template;
  // The ByteLevel decoder (tokens' bytes, then UTF-8 as Rust's from_utf8_lossy); without a
  // decoder the library joins the tokens with spaces.
  bool byte_level_decoder = false;
  std::size_t vocab_size = 0;  // the model's and the added tokens', every id below it
};

}  // namespace shardwise::text

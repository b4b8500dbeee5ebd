#pragma once
// Writing a token file ahead of time, as nanoGPT's prepare.py does: a text file encoded by a
// tokenizer as it streams (text/text_stream.hpp) into the little-endian uint16 or uint32 ids that
// `--data-format tokens-u16|tokens-u32` reads. The file appears whole or not at all.

#include <cstdint>
#include <functional>
#include <string>

#include "shardwise/text/text_stream.hpp"
#include "shardwise/text/tokenizer.hpp"
#include "shardwise/train/token_source.hpp"

namespace shardwise::train {

struct PreparedTokens {
  std::uint64_t text_bytes = 0;
  std::uint64_t tokens = 0;
  TokenFormat format = TokenFormat::kTokensU16;
  double seconds = 0;
};

// The narrowest token format that holds every id of `tokenizer` (tokens-u16 up to 65536 tokens).
[[nodiscard]] TokenFormat token_format_for(const text::Tokenizer& tokenizer);

// Encodes `text_path` with `tokenizer` into `out_path` in `format` (kText is refused, as is
// tokens-u16 for a tokenizer of more than 65536 tokens), reporting progress as it goes. `replace`
// allows a regular file at `out_path` to be replaced; anything else there is refused, and a
// failure leaves nothing behind. InvalidArgument naming the setting and the value.
PreparedTokens prepare_token_file(const std::string& text_path, const text::Tokenizer& tokenizer,
                                  const std::string& out_path, TokenFormat format, bool replace,
                                  const text::StreamOptions& options,
                                  const std::function<void(const text::StreamProgress&)>& progress);

}  // namespace shardwise::train

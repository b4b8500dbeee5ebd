#pragma once
// The decoders, each a step over the list of tokens as the library's decode_chain: byte-level
// tokenizers' ByteLevel, and the SentencePiece-style chain Replace "▁" -> " ", ByteFallback,
// Fuse, Strip (or Metaspace alone). The text is the steps' last list joined.

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

namespace shardwise::text::detail {

// Every token's bytes (byte_level.hpp), then all of them made UTF-8 at once as Rust's
// from_utf8_lossy: one token.
struct ByteLevelDecoder {};
// Each token with each match of a plain string pattern (not empty) replaced.
struct ReplaceDecoder {
  std::string pattern;
  std::string content;
};
// Each run of byte tokens <0xNN> becomes its bytes as text where they are UTF-8, else one
// U+FFFD per byte (the whole run, not the bad bytes alone: the library's String::from_utf8).
struct ByteFallbackDecoder {};
// The tokens joined into one.
struct FuseDecoder {};
// Up to `start` leading characters `content` cut from each token (a trailing cut, `stop`, is not
// computed: the library fails on a token shorter than it).
struct StripDecoder {
  char32_t content = U' ';
  std::size_t start = 0;
};
// `replacement` (one character, UTF-8) becomes a space, except in the first token where the
// scheme prepends one: there it is dropped, every occurrence of it.
struct MetaspaceDecoder {
  std::string replacement;
  bool drops_in_first = true;  // prepend_scheme "always" or "first"
};
using DecoderStep = std::variant<ByteLevelDecoder, ReplaceDecoder, ByteFallbackDecoder, FuseDecoder,
                                 StripDecoder, MetaspaceDecoder>;

// The text of `tokens` after every step (the empty list joins the tokens as they are).
[[nodiscard]] std::string decode_tokens(const std::vector<DecoderStep>& steps,
                                        std::vector<std::string> tokens);

}  // namespace shardwise::text::detail

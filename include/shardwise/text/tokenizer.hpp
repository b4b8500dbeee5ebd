#pragma once
// A BPE tokenizer read from Hugging Face's tokenizer.json, giving the ids and text the
// `tokenizers` library gives for the same file: byte-level BPE (the kind GPT-2, Llama 3 and
// SmolLM2 ship) and SentencePiece-style BPE with byte fallback (Llama 2's, TinyLlama's,
// Mistral's and Mixtral's: a Prepend and Replace normalizer or a Metaspace pre-tokenizer, <0xNN>
// byte tokens, the Replace/ByteFallback/Fuse/Strip or Metaspace decoders). What the file asks
// for that it does not compute exactly (another model such as Unigram or WordPiece, another
// normalizer, a regular expression it does not know, dropout, truncation, ...) is refused when
// the file is read, naming the field and its value, rather than tokenized differently.
//
// Every member is const and may be called from several threads at once on one Tokenizer (ranks
// that are threads share one); copies share the vocabulary.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardwise::text {

class Tokenizer {
 public:
  // Reads a tokenizer.json; InvalidArgument naming the path, the field and the value where the
  // file is not one (a device such as /dev/zero, truncated JSON, ids out of range or given
  // twice, merges naming tokens the vocabulary lacks) or asks for what is not computed.
  [[nodiscard]] static Tokenizer from_file(const std::filesystem::path& path);
  // The same from the file's text; `what` names it in errors.
  [[nodiscard]] static Tokenizer from_json(std::string_view text, const std::string& what);

  // As the library's Tokenizer.encode(text, add_special_tokens).ids: the text split on the
  // added tokens, normalized, pre-tokenized, each piece's BPE merges, then the post-processor's
  // special tokens where add_special_tokens. InvalidArgument where `text` is not UTF-8.
  [[nodiscard]] std::vector<std::int32_t> encode(std::string_view text,
                                                 bool add_special_tokens = true) const;
  // As the library's decode(ids, skip_special_tokens): the tokens through the file's decoder
  // (byte-level: the tokens' bytes, every byte sequence that is not UTF-8 replaced by U+FFFD as
  // the library replaces it; none: the tokens joined by spaces). InvalidArgument naming an id
  // outside the vocabulary (the library skips such ids in silence).
  [[nodiscard]] std::string decode(std::span<const std::int32_t> ids,
                                   bool skip_special_tokens = false) const;

  // The library's get_vocab_size(with_added_tokens=True): every id is below it.
  [[nodiscard]] std::size_t vocab_size() const;
  // The id of a token (an added token's content, or a token of the model's vocabulary, in its
  // spelling there: "Ġthe", "▁the", "<0x0A>"), as the library's token_to_id.
  [[nodiscard]] std::optional<std::int32_t> token_to_id(std::string_view token) const;
  // The token of an id, as the library's id_to_token; nullopt outside the vocabulary.
  [[nodiscard]] std::optional<std::string> id_to_token(std::int32_t id) const;

  // For encoding a text in pieces (text/text_stream.hpp); tokenizer_cuts.cpp.
  // The special ids the post-processor puts before and after the sequence, where its template
  // places the sequence once (nullopt where it places it twice: such a text cannot be encoded
  // in pieces).
  struct SpecialIds {
    std::vector<std::int32_t> before;
    std::vector<std::int32_t> after;
  };
  [[nodiscard]] std::optional<SpecialIds> special_ids_around_sequence() const;
  // The largest place p in (0, text.size()) where the text can be cut: for any text `rest`,
  // encode(text + rest, false) is encode(text[0, p), false) followed by
  // encode_continuing(text[p, end) + rest), because every step of the pipeline splits the text
  // there anyway (a line break or a space between letters, under a pre-tokenizer that splits
  // words, added tokens that cannot span or strip across it), or, for SentencePiece-style BPE,
  // no merge joins the two sides of a space between letters. 0 where there is no such place, or
  // where the pipeline splits nowhere (another normalizer, one BPE word for the whole text).
  [[nodiscard]] std::size_t last_cut(std::string_view text) const;
  // The ids of a text that continues another at a place last_cut found: encode(text, false),
  // less what the pipeline marks the start of a text with (SentencePiece's prepended "▁").
  [[nodiscard]] std::vector<std::int32_t> encode_continuing(std::string_view text) const;

  // The bytes of `text` each of `ids` (encode(text, false)) stands for, as the library's offsets
  // give them: a token's bytes (byte-level's alphabet read back, SentencePiece's "▁" as a space
  // and <0xNN> as its byte, an added token's content), laid over the text in order. A "▁" or
  // space the pipeline put before a piece stands for no byte; whitespace an added token strips
  // belongs to no token. InvalidArgument where the ids cannot be laid over the text (an unknown
  // token's, a normalizer that rewrites other characters, ids of another text).
  struct Span {
    std::size_t begin = 0;
    std::size_t end = 0;
  };
  [[nodiscard]] std::vector<Span> token_spans(std::string_view text,
                                              std::span<const std::int32_t> ids) const;
  // Whether last_cut can ever find a place: false where the pipeline splits nowhere.
  [[nodiscard]] bool cuts_text() const;

  struct Parts;  // what a file is read into (src/text/detail/tokenizer_parts.hpp)

 private:
  explicit Tokenizer(std::shared_ptr<const Parts> parts) : parts_(std::move(parts)) {}
  [[nodiscard]] std::vector<std::int32_t> encode_text(std::string_view text,
                                                      bool add_special_tokens,
                                                      bool continues) const;
  std::shared_ptr<const Parts> parts_;
};

}  // namespace shardwise::text

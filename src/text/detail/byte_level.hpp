#pragma once
// GPT-2's byte-level alphabet: each of the 256 bytes stands as one printable character, so that
// a vocabulary of text tokens spells any bytes. Printable Latin-1 bytes ('!' to '~', U+00A1 to
// U+00AC, U+00AE to U+00FF) stand for themselves, the 68 others for U+0100 on in byte order
// (a space is U+0120 'Ġ', a newline U+010A 'Ċ').

#include <optional>
#include <string>
#include <string_view>

namespace shardwise::text::detail {

[[nodiscard]] char32_t byte_character(unsigned char byte);
// The byte a character of the alphabet stands for; nullopt for any other character.
[[nodiscard]] std::optional<unsigned char> character_byte(char32_t c);

// `bytes` spelt in the alphabet, as UTF-8 (the ByteLevel pre-tokenizer's output).
[[nodiscard]] std::string byte_level_spelling(std::string_view bytes);

// Appends the bytes `token` (UTF-8) stands for, as the ByteLevel decoder: each character's byte
// where every character of the token is in the alphabet, else the token's own bytes (an added
// token such as "<|endoftext|>" is in it; one holding a space is not).
void append_token_bytes(std::string_view token, std::string& out);

}  // namespace shardwise::text::detail

#pragma once
// A conversation as fine-tuning reads it: rendered with the model's chat template, tokenized as
// transformers' apply_chat_template(tokenize=True) tokenizes it (the rendered text whole, without
// the post-processor's special tokens: the template writes them), and each token marked where it
// is an assistant's, the tokens the loss is taken on (TRL's assistant_only_loss).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/text/chat_template.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {

struct EncodedChat {
  std::string text;                     // the template's rendering
  std::vector<std::int32_t> ids;        // tokenizer.encode(text, add_special_tokens=false)
  std::vector<std::uint8_t> assistant;  // per id: 1 where it is an assistant's
};

// The rendering of `messages` (add_generation_prompt false) and the bytes of it that are the
// assistant's. A template with `{% generation %}` blocks marks them itself (as transformers'
// return_assistant_tokens_mask reads them). For any other template, assistant message i's bytes
// are those the render of messages[0, i] adds to the render of messages[0, i) with the
// generation prompt: the message, the end of its turn and what follows it up to the next
// message (TRL's completion of a conversational prompt). That needs each of these renders to
// begin the next and the whole: InvalidArgument naming the message otherwise (a template that
// renders a turn differently once others follow, such as one dropping earlier reasoning), and
// where the template fails on a conversation's first messages, or those renders together make
// more than 64 MiB. `variables` go to every render (chat_context: tools, keyword arguments).
[[nodiscard]] RenderedChat render_assistant_ranges(
    const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
    const nlohmann::ordered_json& special_tokens, const ChatRenderOptions& options = {},
    const nlohmann::ordered_json& variables = nlohmann::ordered_json::object());

// Marks the ids of `text` (`ids` = tokenizer.encode(text, false)) that hold a byte of one of the
// ranges, by where each token lies (Tokenizer::token_spans): from the token holding a range's
// first byte to the token holding its last, as transformers marks them through its offsets and
// char_to_token. Where a range's edge falls inside a token, the token is marked.
[[nodiscard]] std::vector<std::uint8_t> mark_tokens_in_ranges(
    const Tokenizer& tokenizer, std::string_view text, std::span<const std::int32_t> ids,
    std::span<const GenerationRange> ranges);

// render_assistant_ranges, encoded, and its ranges marked.
[[nodiscard]] EncodedChat encode_chat(
    const ChatTemplate& chat_template, const Tokenizer& tokenizer,
    const nlohmann::ordered_json& messages, const nlohmann::ordered_json& special_tokens,
    const ChatRenderOptions& options = {},
    const nlohmann::ordered_json& variables = nlohmann::ordered_json::object());

}  // namespace shardwise::text

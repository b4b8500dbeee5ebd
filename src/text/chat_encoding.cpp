#include "shardwise/text/chat_encoding.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise::text {
namespace {

// The first `count` messages.
nlohmann::ordered_json first_messages(const nlohmann::ordered_json& messages, std::size_t count) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < count; ++i) out.push_back(messages[i]);
  return out;
}

std::string message_words(std::size_t index) { return "message " + std::to_string(index); }

// Where a byte offset of the text falls among its ids: the index of the token that starts there
// (exact), or of the token that holds it (not exact).
struct TokenAt {
  std::size_t index = 0;
  bool exact = false;
};

TokenAt token_at(const Tokenizer& tokenizer, std::string_view text,
                 std::span<const std::int32_t> ids, std::size_t offset) {
  if (offset == 0) return {0, true};
  if (offset >= text.size()) return {ids.size(), true};
  // The text before the offset encoded alone: where its ids begin those of the whole, the offset
  // is a boundary between tokens; where they part, the whole's token there spans the offset.
  const std::vector<std::int32_t> before = tokenizer.encode(text.substr(0, offset), false);
  const std::size_t limit = std::min(before.size(), ids.size());
  std::size_t same = 0;
  while (same < limit && before[same] == ids[same]) ++same;
  if (same == before.size()) return {same, true};
  return {std::min(same, ids.size() - 1), false};
}

}  // namespace

RenderedChat render_assistant_ranges(const ChatTemplate& chat_template,
                                     const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& special_tokens,
                                     const ChatRenderOptions& options) {
  if (!messages.is_array()) throw InvalidArgument("messages are not a list");
  if (chat_template.has_generation_blocks()) {
    return chat_template.render_with_generation_ranges(
        chat_context(messages, false, special_tokens), options);
  }
  RenderedChat out;
  out.text = chat_template.render(chat_context(messages, false, special_tokens), options);
  const auto render = [&](std::size_t count, bool prompt, std::size_t index) {
    try {
      return chat_template.render(
          chat_context(first_messages(messages, count), prompt, special_tokens), options);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument(message_words(index) +
                            " (an assistant's): the chat template fails on the messages before "
                            "it, which mark where its tokens start: " +
                            error.what());
    }
  };
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::ordered_json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || message["role"] != "assistant") {
      continue;
    }
    const std::string prompt = render(i, true, i);
    const std::string through = i + 1 == messages.size() ? out.text : render(i + 1, false, i);
    if (!through.starts_with(prompt) || !out.text.starts_with(through)) {
      throw InvalidArgument(
          message_words(i) +
          " (an assistant's): the chat template does not render the conversation up to it as "
          "the beginning of the whole (it renders a turn differently once others follow), so "
          "its tokens cannot be told apart; a template with {% generation %} blocks marks them");
    }
    out.generation.push_back({prompt.size(), through.size()});
  }
  return out;
}

std::vector<std::uint8_t> mark_tokens_in_ranges(const Tokenizer& tokenizer, std::string_view text,
                                                std::span<const std::int32_t> ids,
                                                std::span<const GenerationRange> ranges) {
  std::vector<std::uint8_t> marks(ids.size(), 0);
  for (const GenerationRange& range : ranges) {
    if (range.begin >= range.end || range.end > text.size()) continue;
    const TokenAt first = token_at(tokenizer, text, ids, range.begin);
    const TokenAt end = token_at(tokenizer, text, ids, range.end);
    const std::size_t last = std::min(ids.size(), end.exact ? end.index : end.index + 1);
    for (std::size_t t = first.index; t < last; ++t) marks[t] = 1;
  }
  return marks;
}

EncodedChat encode_chat(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                        const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& special_tokens,
                        const ChatRenderOptions& options) {
  RenderedChat rendered = render_assistant_ranges(chat_template, messages, special_tokens, options);
  EncodedChat out;
  out.ids = tokenizer.encode(rendered.text, false);
  out.assistant = mark_tokens_in_ranges(tokenizer, rendered.text, out.ids, rendered.generation);
  out.text = std::move(rendered.text);
  return out;
}

}  // namespace shardwise::text

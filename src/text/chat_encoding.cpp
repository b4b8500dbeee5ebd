#include "shardwise/text/chat_encoding.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise::text {
namespace {

// Without {% generation %} blocks, an assistant's turn is found by rendering the messages before
// it and through it: a conversation renders its prefixes once per assistant message. The bytes
// those renders make together are bounded, so that one hostile line cannot take hours.
constexpr std::size_t kMostPrefixBytes = std::size_t{64} << 20;

// The first `count` messages.
nlohmann::ordered_json first_messages(const nlohmann::ordered_json& messages, std::size_t count) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < count; ++i) out.push_back(messages[i]);
  return out;
}

std::string message_words(std::size_t index) { return "message " + std::to_string(index); }

}  // namespace

RenderedChat render_assistant_ranges(const ChatTemplate& chat_template,
                                     const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& special_tokens,
                                     const ChatRenderOptions& options,
                                     const nlohmann::ordered_json& variables) {
  if (!messages.is_array()) throw InvalidArgument("messages are not a list");
  if (chat_template.has_generation_blocks()) {
    return chat_template.render_with_generation_ranges(
        chat_context(messages, false, special_tokens, variables), options);
  }
  RenderedChat out;
  out.text =
      chat_template.render(chat_context(messages, false, special_tokens, variables), options);
  std::size_t rendered = 0;
  const auto render = [&](std::size_t count, bool prompt, std::size_t index) {
    std::string text;
    try {
      text = chat_template.render(
          chat_context(first_messages(messages, count), prompt, special_tokens, variables),
          options);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument(message_words(index) +
                            " (an assistant's): the chat template fails on the messages before "
                            "it, which mark where its tokens start: " +
                            error.what());
    }
    rendered += text.size();
    if (rendered > kMostPrefixBytes) {
      throw InvalidArgument(
          "finding the assistant's tokens of these " + std::to_string(messages.size()) +
          " messages renders more than " + std::to_string(kMostPrefixBytes >> 20) +
          " MiB (the conversation before each assistant message); a template with "
          "{% generation %} blocks marks them in one rendering");
    }
    return text;
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
  const std::vector<Tokenizer::Span> spans = tokenizer.token_spans(text, ids);
  std::vector<std::uint8_t> marks(ids.size(), 0);
  for (const GenerationRange& range : ranges) {
    if (range.begin >= range.end || range.end > text.size()) continue;
    // From the token holding the range's first byte (or the first after it) to the token holding
    // its last (or the last before it).
    const auto first = std::partition_point(
        spans.begin(), spans.end(), [&](const Tokenizer::Span& s) { return s.end <= range.begin; });
    const auto end = std::partition_point(
        spans.begin(), spans.end(), [&](const Tokenizer::Span& s) { return s.begin < range.end; });
    for (auto it = first; it < end; ++it) marks[static_cast<std::size_t>(it - spans.begin())] = 1;
  }
  return marks;
}

EncodedChat encode_chat(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                        const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& special_tokens,
                        const ChatRenderOptions& options, const nlohmann::ordered_json& variables) {
  RenderedChat rendered =
      render_assistant_ranges(chat_template, messages, special_tokens, options, variables);
  EncodedChat out;
  out.ids = tokenizer.encode(rendered.text, false);
  out.assistant = mark_tokens_in_ranges(tokenizer, rendered.text, out.ids, rendered.generation);
  out.text = std::move(rendered.text);
  return out;
}

}  // namespace shardwise::text

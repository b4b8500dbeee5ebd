#pragma once
// A model's chat template (the Jinja text in tokenizer_config.json's `chat_template` or in
// chat_template.jinja), rendered as transformers' apply_chat_template(messages, tokenize=False)
// renders it with Python's jinja2: an ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, `raise_exception`, `strftime_now`, transformers' `tojson`, `namespace`, loop
// controls and the `{% generation %}` block.
//
// The engine implements the part of Jinja that published chat templates use. A construct it
// does not implement is refused by name with its line and column when the template is parsed
// (never rendered differently in silence), and so is an operation at render time that it does
// not compute as Python would (case mapping of non-ASCII text, for one). A template cannot
// hang or exhaust memory: nesting, loop iterations and the output are bounded.

#include <cstddef>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise::text {

namespace detail {
struct ChatProgram;
}

// Bounds on one render.
struct ChatRenderLimits {
  std::size_t max_output_bytes = std::size_t{64} << 20;
  std::size_t max_loop_iterations = std::size_t{1} << 20;  // all loops of one render together
  std::size_t max_call_depth = 64;                         // macros calling macros
};

struct ChatRenderOptions {
  // The time `strftime_now` formats, as local time; nullopt: the clock's now. Tests fix it.
  std::optional<std::tm> now;
  ChatRenderLimits limits;
};

// The bytes of the output a `{% generation %}` block rendered: [begin, end).
struct GenerationRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  friend bool operator==(const GenerationRange&, const GenerationRange&) = default;
};

struct RenderedChat {
  std::string text;
  std::vector<GenerationRange> generation;  // in the order the blocks were rendered
};

class ChatTemplate {
 public:
  // InvalidArgument naming `what`, the line:column and the construct where the text is not a
  // template or uses what is not implemented (`{% include %}`, `{% raw %}`, an unknown filter).
  [[nodiscard]] static ChatTemplate parse(std::string_view source, const std::string& what);

  // Renders with `context` as the template's variables (an object: `messages`,
  // `add_generation_prompt`, `bos_token`, ...). InvalidArgument with the template's message
  // where it calls raise_exception, and naming the line:column where an operation fails as it
  // fails in Python (an attribute of an undefined value, adding a string to a number).
  [[nodiscard]] std::string render(const nlohmann::json& context,
                                   const ChatRenderOptions& options = {}) const;
  [[nodiscard]] std::string render(const nlohmann::ordered_json& context,
                                   const ChatRenderOptions& options = {}) const;
  // The same, with the byte ranges of the `{% generation %}` blocks (the assistant's tokens,
  // which the loss is taken on), as transformers' return_assistant_tokens_mask records them.
  [[nodiscard]] RenderedChat render_with_generation_ranges(
      const nlohmann::ordered_json& context, const ChatRenderOptions& options = {}) const;

  [[nodiscard]] const std::string& what() const;
  [[nodiscard]] bool has_generation_blocks() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const detail::ChatProgram> program);
  std::shared_ptr<const detail::ChatProgram> program_;
};

// The context transformers' apply_chat_template gives the template: `messages` with every key
// whose value is null dropped (as transformers drops them), `tools` and `documents` null,
// `add_generation_prompt`, then the special tokens (bos_token, eos_token, ...) of
// `special_tokens`, an object of strings; then `variables` (an object: `tools`, the keyword
// arguments apply_chat_template passes on), set last as transformers sets them.
[[nodiscard]] nlohmann::ordered_json chat_context(
    const nlohmann::ordered_json& messages, bool add_generation_prompt,
    const nlohmann::ordered_json& special_tokens,
    const nlohmann::ordered_json& variables = nlohmann::ordered_json::object());

// The chat template of a model folder: chat_template.jinja if present, else
// tokenizer_config.json's `chat_template` (a string, or a list of {"name", "template"} of which
// the one named "default" is taken); nullopt where neither has one. InvalidArgument naming the
// file and field where one is malformed or too large.
[[nodiscard]] std::optional<ChatTemplate> chat_template_of_folder(
    const std::filesystem::path& folder);

// The special-token strings of a folder's tokenizer_config.json (bos_token, eos_token,
// pad_token, unk_token, sep_token, cls_token, mask_token, each a string or {"content": ...}),
// as an object for chat_context; empty where the folder has no tokenizer_config.json.
[[nodiscard]] nlohmann::ordered_json special_tokens_of_folder(const std::filesystem::path& folder);

}  // namespace shardwise::text

#pragma once
// Fine-tuning data as people keep it: JSON Lines, one example an object a line, every line of one
// kind, encoded as TRL's SFTTrainer encodes it:
//   {"text": "..."}: a document; the loss on every token.
//   {"prompt": ..., "completion": ...}: strings (the tokenizer's special tokens added, as
//     tokenizer(prompt + completion) adds them), or lists of messages rendered with the chat
//     template (the prompt with its generation prompt); the loss on the completion's tokens.
//   {"messages": [{"role": ..., "content": ...}, ...]}: a conversation rendered with the chat
//     template (text/chat_encoding.hpp); the loss on the assistant's tokens.
// A text or a completion that is a string gets the tokenizer's end-of-sequence token appended
// unless it ends with it (TRL's eos). A line's "tools" and "chat_template_kwargs" go to the chat
// template, as TRL passes them to apply_chat_template. Other keys of a line ("id", "source") are
// taken and not read. Blank lines are skipped; anything else that is not one of these is refused
// naming the line.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/text/chat_template.hpp"
#include "shardwise/text/tokenizer.hpp"
#include "shardwise/train/example_set.hpp"

namespace shardwise::train {

enum class ExampleKind { kText, kPromptCompletion, kMessages };

// What encodes the examples: a model folder's tokenizer, chat template and special tokens.
struct ExampleEncoder {
  std::shared_ptr<const text::Tokenizer> tokenizer;
  // Needed by conversations (messages, or a prompt and completion that are lists of messages).
  std::optional<text::ChatTemplate> chat_template;
  // tokenizer_config.json's special tokens (bos_token, eos_token, ...), for the template and for
  // the end-of-sequence token appended to text.
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
  // Names where the tokenizer came from, in messages ("tokenizer.json 'model/tokenizer.json'").
  std::string words;
  // One time for every render (strftime_now); unset, read_json_lines sets the file's.
  text::ChatRenderOptions render;
};

// The tokenizer.json at `path` with the chat template and special tokens of its folder.
[[nodiscard]] ExampleEncoder example_encoder_of(const std::string& path);

// The kind of one line's object; InvalidArgument naming what it holds where it is none.
[[nodiscard]] ExampleKind example_kind(const nlohmann::ordered_json& line);

struct EncodedExample {
  std::vector<std::int32_t> tokens;
  std::vector<std::uint8_t> counted;  // per token: 1 where the loss is taken on predicting it
};

// One example of `kind`; InvalidArgument naming the field where a value has the wrong type or a
// conversation cannot be rendered.
[[nodiscard]] EncodedExample encode_example(const nlohmann::ordered_json& line, ExampleKind kind,
                                            const ExampleEncoder& encoder);

// The examples of the JSON Lines file at `path` (its first `most`), named by `flag`
// ("--data 'chat.jsonl'"). A template that writes today's date (strftime_now) is given the
// file's modification time, unless the encoder fixes one: the same tokens in every process and
// on every day. InvalidArgument naming the flag, the path and the line where the file is
// missing, not a regular file, has a line that is not JSON, holds another kind than the first
// line, or a line over 16 MiB; or where it holds no example.
[[nodiscard]] std::shared_ptr<const ExampleSet> read_json_lines(
    const std::string& path, const ExampleEncoder& encoder, const std::string& flag,
    std::size_t most = static_cast<std::size_t>(-1));

}  // namespace shardwise::train

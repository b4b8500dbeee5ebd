#include "shardwise/train/fine_tuning_data.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <exception>
#include <filesystem>
#include <thread>

#include "../detail/file_io.hpp"
#include "../detail/unique_keys.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/chat_encoding.hpp"

namespace shardwise::train {
namespace {

// A line is parsed whole (its JSON some 30 times its size in memory at most).
constexpr std::size_t kMaxLineBytes = std::size_t{16} << 20;
constexpr std::size_t kReadBlock = std::size_t{1} << 20;

using Json = nlohmann::ordered_json;

const Json& string_field(const Json& line, const char* key) {
  const Json& value = line.at(key);
  if (!value.is_string()) {
    throw InvalidArgument(std::string("\"") + key + "\" is " + std::string(value.type_name()) +
                          "; expected a string");
  }
  return value;
}

// A string, or a list of messages (each an object with a "role").
bool is_conversation(const Json& value) { return value.is_array(); }

void check_messages(const Json& messages, const char* key) {
  if (!messages.is_array() || messages.empty()) {
    throw InvalidArgument(
        std::string("\"") + key + "\" is " +
        (messages.is_array() ? "an empty list" : std::string(messages.type_name())) +
        "; expected a list of messages");
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      throw InvalidArgument(std::string("\"") + key + "\"[" + std::to_string(i) +
                            "] is not a message: an object with a \"role\" string");
    }
  }
}

const text::ChatTemplate& template_of(const ExampleEncoder& encoder) {
  if (!encoder.chat_template) {
    throw InvalidArgument("a conversation needs a chat template, and " + encoder.words +
                          "'s folder has none (tokenizer_config.json's chat_template or "
                          "chat_template.jinja)");
  }
  return *encoder.chat_template;
}

// The end-of-sequence token to put after `text`: none where it ends with it already (TRL's rule,
// for a text and for a completion).
std::string eos_after(const std::string& text, const ExampleEncoder& encoder) {
  const Json* eos =
      encoder.special_tokens.contains("eos_token") ? &encoder.special_tokens["eos_token"] : nullptr;
  if (eos == nullptr || !eos->is_string()) return {};
  const auto& token = eos->get_ref<const std::string&>();
  if (token.empty() || text.ends_with(token)) return {};
  return token;
}

// What a line gives the chat template besides the messages, as TRL passes them to
// apply_chat_template: "tools" (a list, or null) and "chat_template_kwargs" (an object).
Json template_variables(const Json& line) {
  Json variables = Json::object();
  if (line.contains("tools")) {
    const Json& tools = line["tools"];
    if (!tools.is_null() && !tools.is_array()) {
      throw InvalidArgument("\"tools\" is " + std::string(tools.type_name()) +
                            "; expected a list of tools");
    }
    variables["tools"] = tools;
  }
  if (line.contains("chat_template_kwargs")) {
    const Json& kwargs = line["chat_template_kwargs"];
    if (!kwargs.is_object()) {
      throw InvalidArgument("\"chat_template_kwargs\" is " + std::string(kwargs.type_name()) +
                            "; expected an object");
    }
    for (const auto& [key, value] : kwargs.items()) variables[key] = value;
  }
  return variables;
}

// The first `prompt` tokens not counted, the rest counted.
EncodedExample counted_after(std::vector<std::int32_t> tokens, std::size_t prompt) {
  EncodedExample out;
  out.counted.assign(tokens.size(), 1);
  std::fill(out.counted.begin(),
            out.counted.begin() + static_cast<std::ptrdiff_t>(std::min(prompt, tokens.size())), 0);
  out.tokens = std::move(tokens);
  return out;
}

EncodedExample encode_prompt_completion(const Json& line, const ExampleEncoder& encoder) {
  const Json& prompt = line.at("prompt");
  const Json& completion = line.at("completion");
  if (is_conversation(prompt) != is_conversation(completion)) {
    throw InvalidArgument(
        "\"prompt\" and \"completion\" are one a list of messages and one not; expected two "
        "strings or two lists");
  }
  if (!is_conversation(prompt)) {
    const std::string& head = string_field(line, "prompt").get_ref<const std::string&>();
    const std::string& tail = string_field(line, "completion").get_ref<const std::string&>();
    // As TRL: the prompt and the whole encoded apart, the prompt's length marking the completion.
    const std::size_t prompt_tokens = encoder.tokenizer->encode(head, true).size();
    return counted_after(encoder.tokenizer->encode(head + tail + eos_after(tail, encoder), true),
                         prompt_tokens);
  }
  check_messages(prompt, "prompt");
  check_messages(completion, "completion");
  const text::ChatTemplate& chat = template_of(encoder);
  Json whole = prompt;
  for (const Json& message : completion) whole.push_back(message);
  const Json variables = template_variables(line);
  const std::string head = chat.render(
      text::chat_context(prompt, true, encoder.special_tokens, variables), encoder.render);
  const std::string all = chat.render(
      text::chat_context(whole, false, encoder.special_tokens, variables), encoder.render);
  return counted_after(encoder.tokenizer->encode(all, false),
                       encoder.tokenizer->encode(head, false).size());
}

std::string line_words(const std::string& what, std::size_t line) {
  return what + " line " + std::to_string(line);
}

}  // namespace

ExampleEncoder example_encoder_of(const std::string& path) {
  ExampleEncoder encoder;
  encoder.tokenizer = std::make_shared<const text::Tokenizer>(text::Tokenizer::from_file(path));
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const std::filesystem::path where = folder.empty() ? std::filesystem::path(".") : folder;
  encoder.chat_template = text::chat_template_of_folder(where);
  encoder.special_tokens = text::special_tokens_of_folder(where);
  encoder.words = "tokenizer.json '" + echo_input(path, 200) + "'";
  return encoder;
}

ExampleKind example_kind(const Json& line) {
  if (!line.is_object()) {
    throw InvalidArgument("is " + std::string(line.type_name()) +
                          "; expected an object holding \"text\", \"prompt\" and "
                          "\"completion\", or \"messages\"");
  }
  if (line.contains("messages")) return ExampleKind::kMessages;
  if (line.contains("prompt") && line.contains("completion")) {
    return ExampleKind::kPromptCompletion;
  }
  if (line.contains("text")) return ExampleKind::kText;
  std::string keys;
  for (const auto& [key, value] : line.items()) {
    if (keys.size() > 200) break;
    keys += (keys.empty() ? "\"" : ", \"") + echo_input(key, 40) + "\"";
  }
  throw InvalidArgument("holds " + (keys.empty() ? std::string("no key") : keys) +
                        "; expected \"text\", \"prompt\" and \"completion\", or \"messages\"");
}

EncodedExample encode_example(const Json& line, ExampleKind kind, const ExampleEncoder& encoder) {
  if (kind != example_kind(line)) {
    throw InvalidArgument("is not of the kind the first line is");
  }
  switch (kind) {
    case ExampleKind::kText: {
      const std::string& body = string_field(line, "text").get_ref<const std::string&>();
      return counted_after(encoder.tokenizer->encode(body + eos_after(body, encoder), true), 0);
    }
    case ExampleKind::kPromptCompletion: return encode_prompt_completion(line, encoder);
    case ExampleKind::kMessages: {
      const Json& messages = line.at("messages");
      check_messages(messages, "messages");
      text::EncodedChat chat =
          text::encode_chat(template_of(encoder), *encoder.tokenizer, messages,
                            encoder.special_tokens, encoder.render, template_variables(line));
      return {std::move(chat.ids), std::move(chat.assistant)};
    }
  }
  throw InvalidArgument("an example of no known kind");
}

namespace {

// `body` on a line's JSON, its errors named by the line.
template <typename Body>
auto on_line(const std::string& what, std::string_view text, std::size_t number, Body&& body) {
  try {
    return body(detail::OrderedUniqueKeys::parse(text, "the line"));
  } catch (const nlohmann::json::exception& error) {
    throw InvalidArgument(line_words(what, number) + " is not JSON: " + error.what());
  } catch (const Error& error) {
    throw InvalidArgument(line_words(what, number) + ": " + error.what());
  }
}

// Lines read, not yet encoded; encoded together, a share of them on each thread, and added in
// the file's order, up to `most` examples.
class LineBatch {
 public:
  LineBatch(const ExampleEncoder& encoder, const std::string& what, ExampleSet& examples,
            std::size_t most)
      : encoder_(encoder), what_(what), examples_(examples), most_(most) {}

  void take(std::string_view line) {
    ++number_;
    if (full() || line.find_first_not_of(" \t\r") == std::string_view::npos) return;
    bytes_ += line.size();
    lines_.push_back({std::string(line), number_, {}, nullptr});
    if (bytes_ >= kBatchBytes || lines_.size() >= kBatchLines ||
        examples_.size() + lines_.size() >= most_) {
      flush();
    }
  }
  [[nodiscard]] std::size_t lines_read() const { return number_; }
  [[nodiscard]] bool full() const { return examples_.size() >= most_; }

  void flush() {
    if (lines_.empty()) return;
    // The kind is the first line's: found first, so that every thread holds each line to it.
    if (!kind_) {
      kind_ = on_line(what_, lines_.front().text, lines_.front().number,
                      [&](const Json& value) { return example_kind(value); });
    }
    const auto threads =
        static_cast<std::size_t>(std::max(1U, std::thread::hardware_concurrency()));
    // Every failure stays with its line (memory, a thread's own): the first line's is thrown.
    const auto encode_share = [&](std::size_t first) {
      for (std::size_t i = first; i < lines_.size(); i += threads) {
        Line& line = lines_[i];
        try {
          line.example = on_line(what_, line.text, line.number, [&](const Json& value) {
            return encode_example(value, *kind_, encoder_);
          });
        } catch (...) {
          line.error = std::current_exception();
        }
      }
    };
    {
      std::vector<std::jthread> workers;  // joined on leaving, a failed start included
      for (std::size_t t = 1; t < std::min(threads, lines_.size()); ++t) {
        workers.emplace_back(encode_share, t);
      }
      encode_share(0);
    }
    for (const Line& line : lines_) {
      if (line.error) std::rethrow_exception(line.error);
      if (!full()) examples_.add(line.example.tokens, line.example.counted);
    }
    lines_.clear();
    bytes_ = 0;
  }

 private:
  static constexpr std::size_t kBatchBytes = std::size_t{8} << 20;
  static constexpr std::size_t kBatchLines = 4096;
  struct Line {
    std::string text;
    std::size_t number = 0;
    EncodedExample example;
    std::exception_ptr error;
  };

  const ExampleEncoder& encoder_;
  const std::string& what_;
  ExampleSet& examples_;
  std::size_t most_;
  std::optional<ExampleKind> kind_;
  std::vector<Line> lines_;
  std::size_t bytes_ = 0;
  std::size_t number_ = 0;
};

}  // namespace

std::shared_ptr<const ExampleSet> read_json_lines(const std::string& path,
                                                  const ExampleEncoder& encoder,
                                                  const std::string& flag, std::size_t most) {
  const std::string what = flag + " '" + echo_input(path, 200) + "'";
  std::uint64_t size = 0;
  std::optional<detail::File> file;
  struct stat status {};
  try {
    file.emplace(path, O_RDONLY);
    size = file->size();
    if (::fstat(file->fd(), &status) != 0) {
      throw FileError(detail::system_error_text(path, errno));
    }
  } catch (const Error& error) {
    throw InvalidArgument(what + ": not a readable regular file (" + error.what() + ")");
  }
  // A template that writes today's date (strftime_now) writes the file's: every process, and a
  // run resumed on another day, encodes the same tokens.
  ExampleEncoder dated = encoder;
  if (!dated.render.now) {
    std::tm written{};
    localtime_r(&status.st_mtime, &written);
    dated.render.now = written;
  }
  auto examples = std::make_shared<ExampleSet>(what);
  LineBatch batch(dated, what, *examples, most);
  std::string pending;
  std::vector<char> block(kReadBlock);
  for (std::uint64_t at = 0; at < size && !batch.full();) {
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(kReadBlock, size - at));
    try {
      file->read_at(block.data(), count, at);
    } catch (const Error& error) {
      throw InvalidArgument(what + ": " + error.what());
    }
    at += count;
    std::string_view rest(block.data(), count);
    for (std::size_t end = rest.find('\n'); end != std::string_view::npos; end = rest.find('\n')) {
      if (pending.empty()) {
        batch.take(rest.substr(0, end));
      } else {
        pending.append(rest.substr(0, end));
        batch.take(pending);
        pending.clear();
      }
      rest.remove_prefix(end + 1);
    }
    if (pending.size() + rest.size() > kMaxLineBytes) {
      batch.flush();  // an error in an earlier line is the first to name
      throw InvalidArgument(line_words(what, batch.lines_read() + 1) + " is longer than " +
                            std::to_string(kMaxLineBytes >> 20) + " MiB");
    }
    pending.append(rest);
  }
  if (!pending.empty()) batch.take(pending);
  batch.flush();
  if (examples->size() == 0) throw InvalidArgument(what + " holds no example");
  return examples;
}

}  // namespace shardwise::train

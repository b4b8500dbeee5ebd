#include "prompt_codec.hpp"

#include "number_text.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cli {
namespace {

std::string ids_text(std::span<const std::int32_t> ids) {
  std::string text;
  for (const std::int32_t id : ids) text += (text.empty() ? "" : " ") + std::to_string(id);
  return text;
}

}  // namespace

PromptCodec prompt_codec(const models::ModelSource& source,
                         const std::optional<std::string>& tokenizer) {
  (void)tokenizer;
  const std::size_t vocab = source.model->vocab_size();
  if (vocab == 256) {
    return {"bytes",
            [](const std::string& text, const std::string&) {
              std::vector<std::int32_t> ids;
              for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
              return ids;
            },
            [](std::span<const std::int32_t> ids) {
              std::string text;
              for (const std::int32_t id : ids) text += static_cast<char>(id);
              return text;
            }};
  }
  return {"ids",
          [vocab, words = source.words](const std::string&,
                                        const std::string& field) -> std::vector<std::int32_t> {
            throw InvalidArgument(field + ": " + words + " has a vocabulary of " +
                                  std::to_string(vocab) +
                                  " tokens and no tokenizer.json; give --tokenizer, or the "
                                  "prompt as --prompt-ids");
          },
          [](std::span<const std::int32_t> ids) { return ids_text(ids); }};
}

std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& flag,
                                          std::size_t vocab) {
  std::vector<std::int32_t> ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    ids.push_back(
        static_cast<std::int32_t>(bounded(item, flag, 0, static_cast<std::int64_t>(vocab) - 1)));
    start = comma + 1;
  }
  return ids;
}

std::vector<std::int32_t> parse_stop_ids(const std::string& text, std::size_t vocab) {
  if (text == "none") return {};
  return parse_token_ids(text, "--stop-ids", vocab);
}

}  // namespace shardwise::cli

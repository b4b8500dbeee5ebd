#include "prompt_codec.hpp"

#include <memory>

#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"

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
  const std::size_t vocab = source.model->vocab_size();
  // An empty --tokenizer is a mistake, not "the folder's own": refused, never read as not given.
  if (tokenizer && tokenizer->empty()) {
    throw InvalidArgument("--tokenizer is empty; expected a tokenizer.json");
  }
  const std::filesystem::path file =
      tokenizer ? std::filesystem::path(*tokenizer) : source.tokenizer;
  if (!file.empty()) {
    const auto bpe = [&] {
      try {
        return std::make_shared<const text::Tokenizer>(text::Tokenizer::from_file(file));
      } catch (const Error& e) {  // named as the user gave it: the flag, or the model's folder
        throw InvalidArgument((tokenizer ? std::string("--tokenizer: ") : source.words + ": ") +
                              e.what());
      }
    }();
    if (bpe->vocab_size() > vocab) {
      throw InvalidArgument("--tokenizer '" + echo_input(file.string(), 200) + "' has " +
                            std::to_string(bpe->vocab_size()) + " tokens; " + source.words +
                            " has a vocabulary of " + std::to_string(vocab));
    }
    return {"tokenizer.json '" + echo_input(file.string(), 200) + "'",
            [bpe](const std::string& text, const std::string&) { return bpe->encode(text); },
            [bpe](std::span<const std::int32_t> ids) {
              // Ids past the tokenizer's (a vocabulary padded for the model axis) are shown as
              // ids; the runs between them decode together, as their bytes join.
              std::string text;
              std::size_t start = 0;
              for (std::size_t i = 0; i <= ids.size(); ++i) {
                if (i < ids.size() && static_cast<std::size_t>(ids[i]) < bpe->vocab_size())
                  continue;
                text += bpe->decode(ids.subspan(start, i - start));
                if (i < ids.size()) text += "[" + std::to_string(ids[i]) + "]";
                start = i + 1;
              }
              return text;
            }};
  }
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

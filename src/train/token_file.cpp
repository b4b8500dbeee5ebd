#include "shardwise/train/token_file.hpp"

#include <chrono>
#include <vector>

#include "../detail/output_file.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {

TokenFormat token_format_for(const text::Tokenizer& tokenizer) {
  return tokenizer.vocab_size() <= 65536 ? TokenFormat::kTokensU16 : TokenFormat::kTokensU32;
}

PreparedTokens prepare_token_file(
    const std::string& text_path, const text::Tokenizer& tokenizer, const std::string& out_path,
    TokenFormat format, bool replace, const text::StreamOptions& options,
    const std::function<void(const text::StreamProgress&)>& progress) {
  if (format == TokenFormat::kText || format == TokenFormat::kJsonLines) {
    throw InvalidArgument("format is " + to_string(format) +
                          "; a token file holds tokens-u16 or tokens-u32");
  }
  if (format == TokenFormat::kTokensU16 && tokenizer.vocab_size() > 65536) {
    throw InvalidArgument("format is tokens-u16, and the tokenizer has " +
                          std::to_string(tokenizer.vocab_size()) +
                          " tokens: ids past 65535 need tokens-u32");
  }
  if (out_path.empty()) throw InvalidArgument("the output path is empty");
  const auto start = std::chrono::steady_clock::now();
  shardwise::detail::OutputFile out(
      out_path,
      replace ? shardwise::detail::IfExists::kReplaceFile : shardwise::detail::IfExists::kRefuse,
      "the output", replace ? "" : "; replacing it must be asked for");
  const std::size_t width = format == TokenFormat::kTokensU16 ? 2 : 4;
  PreparedTokens result;
  result.format = format;
  std::vector<unsigned char> bytes;
  text::encode_file(
      tokenizer, text_path, "the text '" + echo_input(text_path, 200) + "'", options,
      [&](std::span<const std::int32_t> ids) {
        bytes.resize(ids.size() * width);
        for (std::size_t i = 0; i < ids.size(); ++i) {
          const auto id = static_cast<std::uint32_t>(ids[i]);
          for (std::size_t b = 0; b < width; ++b) bytes[i * width + b] = (id >> (8 * b)) & 0xff;
        }
        out.write(bytes.data(), bytes.size());
        result.tokens += ids.size();
        return true;
      },
      [&](const text::StreamProgress& done) {
        result.text_bytes = done.bytes;
        if (progress) progress(done);
      });
  out.commit();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace shardwise::train

#include "detail/normalizer.hpp"

#include <string>
#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise::text::detail {

namespace {

[[noreturn]] void refuse_growth(std::size_t most) {
  throw InvalidArgument("the tokenizer's normalizer or Replace decoder makes more than " +
                        std::to_string(most) +
                        " bytes of the text (16 times its size and 4096): not computed");
}

}  // namespace

void append_replaced(std::string_view text, std::string_view pattern, std::string_view content,
                     std::string& out, std::size_t most) {
  std::size_t from = 0;
  for (std::size_t at = text.find(pattern); at != std::string_view::npos;
       at = text.find(pattern, from)) {
    out.append(text.substr(from, at - from));
    if (content.size() > most || out.size() > most - content.size()) refuse_growth(most);
    out.append(content);
    from = at + pattern.size();
  }
  out.append(text.substr(from));
  if (out.size() > most) refuse_growth(most);
}

std::string normalize(const std::vector<NormalizerStep>& steps, std::string_view text) {
  const std::size_t most = most_bytes_from(text.size());
  std::string current(text);
  std::string next;
  for (const NormalizerStep& step : steps) {
    if (const auto* prepend = std::get_if<PrependStep>(&step)) {
      if (current.empty()) continue;
      if (current.size() + prepend->text.size() > most) refuse_growth(most);
      current.insert(0, prepend->text);
      continue;
    }
    const auto& replace = std::get<ReplaceStep>(step);
    next.clear();
    next.reserve(current.size());
    append_replaced(current, replace.pattern, replace.content, next, most);
    std::swap(current, next);
  }
  return current;
}

}  // namespace shardwise::text::detail

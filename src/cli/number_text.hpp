#pragma once
// Numbers typed on the command line, read exactly as given so that errors can quote them.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/text_format.hpp"

namespace shardwise::cli {

// The finite number `text` spells out. Throws InvalidArgument quoting `flag` and the text for
// anything else: empty, trailing characters, out of range ("1e999"), inf or nan.
double finite_number(const std::string& text, std::string_view flag);

// `value` with at most `digits` significant digits ("0.375", "0.001727").
using shardwise::detail::significant;

// The integer `text` spells out in decimal. Throws InvalidArgument quoting `flag` and the text
// for anything else, including values beyond 64 bits.
std::int64_t integer(const std::string& text, std::string_view flag);

// integer(), and between `least` and `most`; otherwise an InvalidArgument quoting the flag, the
// text and the range.
std::int64_t bounded(const std::string& text, std::string_view flag, std::int64_t least,
                     std::int64_t most);

// "464,3290,318": ids of a vocabulary of `vocab` tokens; InvalidArgument naming `flag`.
[[nodiscard]] std::vector<std::int32_t> parse_token_ids(const std::string& text,
                                                        const std::string& flag, std::size_t vocab);
// --stop-ids: ids as above, or "none".
[[nodiscard]] std::vector<std::int32_t> parse_stop_ids(const std::string& text, std::size_t vocab);

}  // namespace shardwise::cli

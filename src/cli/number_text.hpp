#pragma once
// Numbers typed on the command line, read exactly as given so that errors can quote them.

#include <cstdint>
#include <string>
#include <string_view>

namespace shardwise::cli {

// The finite number `text` spells out. Throws InvalidArgument quoting `flag` and the text for
// anything else: empty, trailing characters, out of range ("1e999"), inf or nan.
double finite_number(const std::string& text, std::string_view flag);

// `value` with at most `digits` significant digits ("0.375", "0.001727").
std::string significant(double value, int digits);

// The integer `text` spells out in decimal. Throws InvalidArgument quoting `flag` and the text
// for anything else, including values beyond 64 bits.
std::int64_t integer(const std::string& text, std::string_view flag);

// integer(), and between `least` and `most`; otherwise an InvalidArgument quoting the flag, the
// text and the range.
std::int64_t bounded(const std::string& text, std::string_view flag, std::int64_t least,
                     std::int64_t most);

}  // namespace shardwise::cli

#pragma once
// The one exception hierarchy of shardwise. Every error caused by bad input derives from
// shardwise::Error and says what was wrong, the value it got, and what it expected.

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shardwise {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A value that is well-formed but not acceptable (a mesh axis of size 0, a duplicate id).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// Text that could not be parsed (a spec string, a mesh string, a shape list).
class ParseError : public Error {
 public:
  using Error::Error;
};

// A sharding that does not fit the array or mesh it is used with.
class ShardingError : public Error {
 public:
  using Error::Error;
};

// A collective or point-to-point operation that failed: a rank that never arrived before the
// timeout, a rank that failed, mismatched calls, or a transport error. The message names the
// operation, the group and the ranks concerned.
class CommError : public Error {
 public:
  using Error::Error;
};

// A file or folder that cannot be opened, read, written or replaced: a full disk, a missing
// file, a symlink or a FIFO where a file of ours belongs, a user's file in the way. The message
// names the path and the system's words.
class FileError : public Error {
 public:
  using Error::Error;
};

// Input echoed in an error message: control characters escaped (\n, \x01) and, past
// `max_chars`, cut with the number of bytes left out, so that a message stays one short line
// whatever the input holds.
// Bytes that are not UTF-8 are escaped too (\xff), so that a path's bytes print as they are.
std::string echo_input(std::string_view text, std::size_t max_chars = 80);

// `bytes` as valid UTF-8, for JSON (which holds only text): every byte that is not part of a
// well-formed UTF-8 sequence is written as the four characters \xNN, the rest as it is. Paths
// are bytes; this is how they are stored and printed.
std::string utf8_text(std::string_view bytes);

}  // namespace shardwise

#pragma once
// A text of any size through a tokenizer as it streams: the ids Tokenizer::encode gives for the
// whole text, computed chunk by chunk (each cut where Tokenizer::last_cut says the pipeline
// splits anyway) on several threads, in memory bounded by the chunks in flight. Training data,
// `shardwise data prepare` and prompt files are encoded through it.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {

struct StreamOptions {
  bool add_special_tokens = true;
  // A chunk's bytes before it is cut; each thread encodes one chunk at a time.
  std::size_t chunk_bytes = std::size_t{1} << 22;
  // The most bytes held without a place to cut (a text of one line and no spaces; or a tokenizer
  // that splits nowhere, such as one with no pre-tokenizer whose vocabulary joins words across
  // spaces): more is refused, naming the place, rather than held whole.
  // 64 MiB: merged as one word, a text takes some 30 bytes a byte.
  std::size_t most_uncut_bytes = std::size_t{1} << 26;
  int threads = 0;  // 0: the machine's hardware threads
};

struct StreamProgress {
  std::uint64_t bytes = 0;        // read so far
  std::uint64_t total_bytes = 0;  // the file's size when opened (0 for files such as /proc's)
  std::uint64_t ids = 0;          // handed to the sink so far
};

// Takes the ids in order, a block at a time; returns false to stop reading (a caller that needs
// only the first tokens).
using IdSink = std::function<bool(std::span<const std::int32_t> ids)>;

// Encodes the regular file at `path` (`what` names it in messages: "--data 'a.txt'"), handing
// the ids to `sink` and, after each block, the progress so far to `progress` (may be empty).
// InvalidArgument naming `what` for a file that cannot be read, is not a regular file (a FIFO,
// a device), is not UTF-8 (naming the byte), or holds more than most_uncut_bytes without a
// place to cut.
void encode_file(const Tokenizer& tokenizer, const std::filesystem::path& path,
                 const std::string& what, const StreamOptions& options, const IdSink& sink,
                 const std::function<void(const StreamProgress&)>& progress = {});

}  // namespace shardwise::text

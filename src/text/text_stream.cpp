#include "shardwise/text/text_stream.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "../detail/file_io.hpp"
#include "detail/utf8.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::text {
namespace {

// The regular file at `path`, opened without blocking on a FIFO in its place.
shardwise::detail::File open_text(const std::filesystem::path& path, const std::string& what) {
  shardwise::detail::File file;
  try {
    file = shardwise::detail::File(path, O_RDONLY);
  } catch (const Error& e) {
    throw InvalidArgument(what + ": " + e.what());
  }
  struct stat info {};
  if (::fstat(file.fd(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw InvalidArgument(what + " is not a regular file (a folder, device, FIFO or socket)");
  }
  return file;
}

// Appends up to `most` bytes; false at the end of the file.
bool read_more(const shardwise::detail::File& file, std::string& buffer, std::size_t most,
               const std::string& what) {
  const std::size_t old_size = buffer.size();
  buffer.resize(old_size + most);
  ssize_t got = 0;
  do {
    got = ::read(file.fd(), buffer.data() + old_size, most);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    const int error = errno;
    buffer.resize(old_size);
    throw InvalidArgument("cannot read " + what + ": " + std::strerror(error));
  }
  buffer.resize(old_size + static_cast<std::size_t>(got));
  return got > 0;
}

// InvalidArgument naming the file's byte where `chunk`, which starts at byte `base`, is not
// UTF-8.
void require_utf8_at(std::string_view chunk, std::uint64_t base, const std::string& what) {
  for (std::size_t at = 0; at < chunk.size();) {
    const std::size_t length = detail::utf8_length(chunk, at);
    if (length == 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(chunk[at]));
      throw InvalidArgument(what + " is not UTF-8 text: byte " + byte + " at offset " +
                            std::to_string(base + at) + " (token files hold ids, not text)");
    }
    at += length;
  }
}

struct Chunk {
  std::string text;
  std::uint64_t base = 0;  // its first byte's offset in the file: after 0, it continues a text
  std::vector<std::int32_t> ids;
  std::exception_ptr error;
};

// Each chunk's ids, the chunks on threads of their own (the first on the calling thread).
void encode_chunks(const Tokenizer& tokenizer, std::vector<Chunk>& chunks,
                   const std::string& what) {
  const auto encode = [&](Chunk& chunk) {
    try {
      require_utf8_at(chunk.text, chunk.base, what);
      chunk.ids = chunk.base == 0 ? tokenizer.encode(chunk.text, false)
                                  : tokenizer.encode_continuing(chunk.text);
    } catch (...) {
      chunk.error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(chunks.size());
  for (std::size_t c = 1; c < chunks.size(); ++c) threads.emplace_back(encode, std::ref(chunks[c]));
  if (!chunks.empty()) encode(chunks[0]);
  for (std::thread& thread : threads) thread.join();
  for (const Chunk& chunk : chunks) {
    if (chunk.error) std::rethrow_exception(chunk.error);
  }
}

}  // namespace

void encode_file(const Tokenizer& tokenizer, const std::filesystem::path& path,
                 const std::string& what, const StreamOptions& options, const IdSink& sink,
                 const std::function<void(const StreamProgress&)>& progress) {
  const shardwise::detail::File file = open_text(path, what);
  StreamProgress done;
  done.total_bytes = file.size();
  const std::optional<Tokenizer::SpecialIds> special = tokenizer.special_ids_around_sequence();
  // A template that places the sequence twice needs the whole text at once: no cuts.
  const bool sequence_once = special.has_value() || !options.add_special_tokens;
  const bool cuts = sequence_once && tokenizer.cuts_text();
  const int threads =
      std::max(1, options.threads > 0 ? options.threads
                                      : static_cast<int>(std::thread::hardware_concurrency()));
  const std::size_t chunk_bytes = std::max<std::size_t>(options.chunk_bytes, 1);

  bool stopped = false;
  const auto hand = [&](std::span<const std::int32_t> ids) {
    if (stopped || ids.empty()) return;
    done.ids += ids.size();
    if (!sink(ids)) stopped = true;
  };
  if (options.add_special_tokens && special) hand(special->before);

  std::string pending;  // read, not yet encoded; starts at byte `base`
  std::uint64_t base = 0;
  std::size_t scanned = 0;  // pending's bytes before this hold no place to cut
  std::vector<Chunk> batch;
  const auto flush = [&] {
    encode_chunks(tokenizer, batch, what);
    for (const Chunk& chunk : batch) hand(chunk.ids);
    batch.clear();
    if (progress) progress(done);
  };
  while (!stopped && read_more(file, pending, chunk_bytes, what)) {
    done.bytes = base + pending.size();
    if (pending.size() < chunk_bytes) continue;
    // The last place to cut, looking only where no earlier look has been (a cut needs the two
    // bytes before it and the one after).
    const std::size_t from = scanned < 3 ? 0 : scanned - 3;
    const std::size_t found = cuts ? tokenizer.last_cut(std::string_view(pending).substr(from)) : 0;
    if (found == 0) {
      scanned = pending.size();
      if (pending.size() >= options.most_uncut_bytes) {
        throw InvalidArgument(
            what + ": the " + std::to_string(pending.size()) + " bytes from offset " +
            std::to_string(base) + " are more than are encoded at once (" +
            std::to_string(options.most_uncut_bytes) + " bytes), and " +
            (cuts ? "hold no place where the tokenizer's pieces can be cut (a space between "
                    "letters, or a line break before one)"
             : !sequence_once ? "this tokenizer's template places the text twice, so it is "
                                "encoded whole"
                              : "this tokenizer splits the text nowhere (a normalizer, or no "
                                "pre-tokenizer that splits words), so it is encoded whole"));
      }
      continue;
    }
    const std::size_t cut = from + found;
    batch.push_back({pending.substr(0, cut), base, {}, nullptr});
    pending.erase(0, cut);
    base += cut;
    scanned = 0;
    if (static_cast<int>(batch.size()) == threads) flush();
  }
  done.bytes = base + pending.size();
  if (!stopped) {
    if (sequence_once) {
      if (!pending.empty()) batch.push_back({std::move(pending), base, {}, nullptr});
      flush();
      if (options.add_special_tokens && special) hand(special->after);
    } else {
      require_utf8_at(pending, base, what);
      hand(tokenizer.encode(pending, true));
    }
  }
  if (progress) progress(done);
}

}  // namespace shardwise::text

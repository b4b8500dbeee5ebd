#include "shardwise/ckpt/checkpoint_reader.hpp"

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "detail/crc32c.hpp"
#include "detail/file_io.hpp"
#include "index_file.hpp"
#include "rank_texts.hpp"
#include "shard_names.hpp"
#include "shardwise/array/transfer_plan.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/safetensors.hpp"

namespace shardwise::ckpt {
namespace {

// At most this many bytes of chunks are read in one call.
constexpr std::uint64_t kWindowBytes = std::uint64_t{64} << 20;
// Whole chunks read straight into a target come in pieces of this size (at least a chunk), each
// checked while the next is read.
constexpr std::uint64_t kPieceBytes = std::uint64_t{8} << 20;

std::string where(const ArrayRecord& array, const ShardRecord& shard) {
  return "array '" + echo_input(array.name, 200) + "' shard " + detail::shard_name("", shard.box) +
         " in '" + echo_input(shard.file, 100) + "'";
}

// The files of a checkpoint, each opened once and its size checked against every shard in it.
class OpenFiles {
 public:
  explicit OpenFiles(const std::filesystem::path& folder) : folder_(folder) {}

  const shardwise::detail::File& file(const ArrayRecord& array, const ShardRecord& shard) {
    auto it = files_.find(shard.file);
    if (it == files_.end()) {
      // A data file is the folder's own: a symlink in its place, which could lead out of the
      // folder, is refused.
      shardwise::detail::File opened(folder_ / shard.file, O_RDONLY | O_NOFOLLOW);
      const std::uint64_t size = opened.size();
      it = files_.emplace(shard.file, std::make_pair(std::move(opened), size)).first;
    }
    if (shard.offset + shard.length > it->second.second) {
      throw CheckpointError(where(array, shard) + " ends at byte " +
                            std::to_string(shard.offset + shard.length) + " of a file of " +
                            std::to_string(it->second.second) + " bytes (a truncated file?)");
    }
    return it->second.first;
  }

 private:
  const std::filesystem::path& folder_;
  std::map<std::string, std::pair<shardwise::detail::File, std::uint64_t>> files_;
};

// A shard's chunks as they are read: a window of consecutive chunks, each verified once read.
class ChunkWindow {
 public:
  // `needed`: the ranges of chunks [first, end) the caller will read from, in order; a window
  // never reads a chunk outside them.
  ChunkWindow(const shardwise::detail::File& file, const ArrayRecord& array,
              const ShardRecord& shard, ReadStats& stats,
              std::vector<std::pair<std::uint64_t, std::uint64_t>> needed)
      : file_(file), array_(array), shard_(shard), stats_(stats), needed_(std::move(needed)) {}

  // Copies shard bytes [begin, begin + size) into `out`, reading the chunks first where the
  // window lacks them.
  void copy(std::uint64_t begin, std::uint64_t size, std::byte* out) {
    if (shard_.chunk_bytes == 0) {  // no checksums: the bytes themselves
      file_.read_at(out, size, shard_.offset + begin);
      stats_.bytes_read += size;
      return;
    }
    const std::uint64_t cb = shard_.chunk_bytes;
    // The checks of the piece read last run on another thread while the next piece is read:
    // the read waits on the disk, the CRC on the CPU.
    std::future<void> checking;
    while (size > 0) {
      // Whole chunks straight into `out`, verified there: no copy through the window.
      if (begin % cb == 0) {
        std::uint64_t whole = size / cb * cb;
        if (begin + size == shard_.length) whole = size;  // up to the shard's short last chunk
        whole = std::min(whole, std::max<std::uint64_t>(cb, kPieceBytes / cb * cb));
        if (whole > 0) {
          file_.read_at(out, whole, shard_.offset + begin);
          stats_.bytes_read += whole;
          if (checking.valid()) checking.get();
          checking = std::async(std::launch::async, [this, begin, out, whole, cb] {
            for (std::uint64_t at = 0; at < whole; at += cb) {
              verify(begin + at, out + at, std::min(cb, whole - at));
            }
          });
          out += whole;
          begin += whole;
          size -= whole;
          continue;
        }
      }
      if (begin < window_begin_ || begin >= window_begin_ + window_.size()) load(begin);
      const std::uint64_t at = begin - window_begin_;
      const std::uint64_t n = std::min<std::uint64_t>(size, window_.size() - at);
      std::memcpy(out, window_.data() + at, n);
      out += n;
      begin += n;
      size -= n;
    }
    if (checking.valid()) checking.get();
  }

 private:
  void load(std::uint64_t byte) {
    const std::uint64_t cb = shard_.chunk_bytes;
    const std::uint64_t first = byte / cb;
    const std::uint64_t most = std::max<std::uint64_t>(1, kWindowBytes / cb);
    // The needed range holding this chunk bounds the window: chunks between two needed ranges
    // (a strided block's gaps) are never read.
    const auto range =
        std::upper_bound(needed_.begin(), needed_.end(), first,
                         [](std::uint64_t c, const auto& r) { return c < r.second; });
    const std::uint64_t range_end = range == needed_.end() ? first + 1 : range->second;
    const std::uint64_t end_chunk = std::min(first + most, std::max(range_end, first + 1));
    const std::uint64_t begin = first * cb;
    const std::uint64_t end = std::min(end_chunk * cb, shard_.length);
    window_.resize(end - begin);
    window_begin_ = begin;
    file_.read_at(window_.data(), window_.size(), shard_.offset + begin);
    stats_.bytes_read += window_.size();
    for (std::uint64_t c = first; c < end_chunk; ++c) {
      const std::uint64_t from = c * cb - begin;
      verify(c * cb, window_.data() + from, std::min(cb, window_.size() - from));
    }
  }

  // Checks the chunk starting at shard byte `at`, whose `n` bytes are at `bytes`.
  void verify(std::uint64_t at, const std::byte* bytes, std::uint64_t n) const {
    const std::uint64_t c = at / shard_.chunk_bytes;
    const std::uint32_t crc = shardwise::detail::crc32c(bytes, n);
    if (crc != shard_.crc32c[c]) {
      throw CheckpointError("checksum mismatch in " + where(array_, shard_) + ": bytes " +
                            std::to_string(shard_.offset + at) + " to " +
                            std::to_string(shard_.offset + at + n) + " have CRC-32C " +
                            std::to_string(crc) + ", the index says " +
                            std::to_string(shard_.crc32c[c]) + " (the file is damaged)");
    }
  }

  const shardwise::detail::File& file_;
  const ArrayRecord& array_;
  const ShardRecord& shard_;
  ReadStats& stats_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> needed_;
  std::vector<std::byte> window_;
  std::uint64_t window_begin_ = 0;
};

// Calls run(source element, destination element, elements) for the row-major runs of `part`
// (inside both boxes) within `source` and `destination`, in increasing order of both, joining
// runs that continue one another in both.
template <class Run>
void for_each_run(const ShardIndex& part, const ShardIndex& source, const ShardIndex& destination,
                  Run&& run) {
  const std::size_t rank = part.size();
  if (rank == 0) {
    run(std::uint64_t{0}, std::uint64_t{0}, std::uint64_t{1});
    return;
  }
  const auto linear = [&](const ShardIndex& box, const std::vector<std::int64_t>& at) {
    std::uint64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      offset = offset * static_cast<std::uint64_t>(box[d].size()) +
               static_cast<std::uint64_t>(at[d] - box[d].start);
    }
    return offset;
  };
  std::vector<std::int64_t> at(rank);
  for (std::size_t d = 0; d < rank; ++d) at[d] = part[d].start;
  const auto length = static_cast<std::uint64_t>(part[rank - 1].size());
  std::uint64_t pending_source = 0;
  std::uint64_t pending_destination = 0;
  std::uint64_t pending = 0;
  while (true) {
    const std::uint64_t s = linear(source, at);
    const std::uint64_t d = linear(destination, at);
    if (pending > 0 && s == pending_source + pending && d == pending_destination + pending) {
      pending += length;
    } else {
      if (pending > 0) run(pending_source, pending_destination, pending);
      pending_source = s;
      pending_destination = d;
      pending = length;
    }
    std::size_t dim = rank - 1;
    while (dim > 0) {
      --dim;
      if (++at[dim] < part[dim].stop) break;
      at[dim] = part[dim].start;
      if (dim == 0) {
        run(pending_source, pending_destination, pending);
        return;
      }
    }
    if (rank == 1) {
      run(pending_source, pending_destination, pending);
      return;
    }
  }
}

// A safetensors file's header text and the bytes of data after it (the one reader of the
// length prefix). `what` names the file in errors.
std::pair<std::string, std::uint64_t> read_header_text(const shardwise::detail::File& file,
                                                       const std::string& what) {
  const std::uint64_t size = file.size();
  if (size < 8) {
    throw CheckpointError(what + " has " + std::to_string(size) + " bytes: no safetensors header");
  }
  unsigned char prefix[8];
  file.read_at(prefix, 8, 0);
  std::uint64_t length = 0;
  for (int b = 7; b >= 0; --b) length = (length << 8) | prefix[b];
  if (length > kMaxSafetensorsHeaderBytes || length > size - 8) {
    throw CheckpointError(what + " says its safetensors header has " + std::to_string(length) +
                          " bytes; the file has " + std::to_string(size - 8) +
                          " after the length and a header may have at most " +
                          std::to_string(kMaxSafetensorsHeaderBytes));
  }
  std::string header(length, '\0');
  file.read_at(header.data(), length, 8);
  return {std::move(header), size - 8 - length};
}

// A safetensors file's header, and where its data starts.
std::pair<SafetensorsHeader, std::uint64_t> read_header(const shardwise::detail::File& file,
                                                        const std::string& what) {
  const auto [header, data_bytes] = read_header_text(file, what);
  try {
    return {parse_safetensors_header(header, data_bytes), 8 + header.size()};
  } catch (const Error& e) {
    throw CheckpointError(what + ": " + e.what());
  }
}

// What `step` throws, a file's failure (FileError) as a CheckpointError: every error of a
// reader is one.
template <typename Step>
auto as_checkpoint_error(Step&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const CheckpointError&) {
    throw;
  } catch (const FileError& e) {
    throw CheckpointError(e.what());
  }
}

}  // namespace

CheckpointReader::CheckpointReader(std::filesystem::path folder, CheckpointIndex index)
    : folder_(std::move(folder)), index_(std::move(index)) {}

CheckpointReader::CheckpointReader(std::filesystem::path folder) : folder_(std::move(folder)) {
  as_checkpoint_error([&] {
    const std::string text = detail::read_index_text(folder_);
    index_ = parse_checkpoint_index(
        text, "'" + echo_input((folder_ / kIndexFileName).string(), 200) + "'");
    index_crc32c_ = shardwise::detail::crc32c(text.data(), text.size());
  });
}

std::pair<std::string, std::uint64_t> read_safetensors_header(const std::filesystem::path& path) {
  return as_checkpoint_error([&] {
    const shardwise::detail::File file(path, O_RDONLY);
    return read_header_text(file, "'" + echo_input(path.string(), 200) + "'");
  });
}

CheckpointReader CheckpointReader::from_safetensors(const std::filesystem::path& path) {
  return as_checkpoint_error([&] {
    const std::string what = "'" + echo_input(path.string(), 200) + "'";
    shardwise::detail::File file(path, O_RDONLY);
    const auto [parsed, data_start] = read_header(file, what);
    CheckpointIndex index;
    nlohmann::json metadata = nlohmann::json::object();
    for (const auto& [key, value] : parsed.metadata) metadata[key] = value;
    index.metadata_json = nlohmann::json{{"safetensors_metadata", metadata}}.dump();
    for (const SafetensorsTensor& tensor : parsed.tensors) {
      ArrayRecord array;
      array.name = tensor.name;
      array.shape = tensor.shape;
      array.dtype = tensor.dtype;
      array.sharding = "whole";
      ShardIndex box;
      for (const std::int64_t size_d : tensor.shape) box.push_back({0, size_d});
      array.shards.push_back({box,
                              path.filename().string(),
                              data_start + tensor.begin,
                              tensor.end - tensor.begin,
                              0,
                              {}});
      index.arrays.push_back(std::move(array));
    }
    std::sort(index.arrays.begin(), index.arrays.end(),
              [](const ArrayRecord& a, const ArrayRecord& b) { return a.name < b.name; });
    check_consistent(index, what);
    return CheckpointReader(
        path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path(),
        std::move(index));
  });
}

ReadStats CheckpointReader::read(std::span<const BlockToLoad> targets) const {
  return as_checkpoint_error([&] {
    ReadStats stats;
    OpenFiles files(folder_);
    for (const BlockToLoad& target : targets) {
      const ArrayRecord* array = index_.find(target.array);
      const std::string name = "array '" + echo_input(target.array, 200) + "'";
      if (array == nullptr) throw CheckpointError("the checkpoint has no " + name);
      if (array->shape != target.shape || array->dtype != target.dtype) {
        throw CheckpointError("the checkpoint's " + name + " is " + to_string(array->shape) + " " +
                              to_string(array->dtype) + "; the layout loading it needs " +
                              to_string(target.shape) + " " + to_string(target.dtype));
      }
      bool inside = target.box.size() == target.shape.size();
      for (std::size_t d = 0; inside && d < target.box.size(); ++d) {
        inside = target.box[d].start >= 0 && target.box[d].start <= target.box[d].stop &&
                 target.box[d].stop <= target.shape[d];
      }
      const std::uint64_t bytes =
          inside ? elements_of(target.box) * size_in_bytes(target.dtype) : 0;
      if (!inside || target.bytes.size() != bytes) {
        throw CheckpointError(
            "a block of " + name + " to load, " + detail::shard_name("", target.box) + " with " +
            std::to_string(target.bytes.size()) + " bytes, is not a box of its shape " +
            to_string(target.shape) + " with its bytes");
      }
      if (bytes == 0) continue;
      stats.bytes_needed += bytes;
      const std::uint64_t element = size_in_bytes(target.dtype);
      // Which shards hold which part of the target: the array layer's transfer planning, with
      // each shard a source block (its holder the shard's number) and the target one receiver.
      std::vector<SourceBlock> sources;
      for (std::size_t s = 0; s < array->shards.size(); ++s) {
        sources.push_back({static_cast<Rank>(s), array->shards[s].box});
      }
      for (const Transfer& piece : plan_transfers(sources, {TargetBlock{-1, target.box}})) {
        const ShardRecord& shard = array->shards[static_cast<std::size_t>(piece.from)];
        const shardwise::detail::File& file = files.file(*array, shard);
        // The chunks the piece's runs touch, as ranges (runs come in increasing order).
        std::vector<std::pair<std::uint64_t, std::uint64_t>> needed;
        if (shard.chunk_bytes > 0) {
          for_each_run(piece.box, shard.box, target.box,
                       [&](std::uint64_t s, std::uint64_t, std::uint64_t n) {
                         const std::uint64_t first = s * element / shard.chunk_bytes;
                         const std::uint64_t end = ((s + n) * element - 1) / shard.chunk_bytes + 1;
                         if (!needed.empty() && first <= needed.back().second) {
                           needed.back().second = std::max(needed.back().second, end);
                         } else {
                           needed.emplace_back(first, end);
                         }
                       });
        }
        ChunkWindow window(file, *array, shard, stats, std::move(needed));
        for_each_run(piece.box, shard.box, target.box,
                     [&](std::uint64_t s, std::uint64_t d, std::uint64_t n) {
                       window.copy(s * element, n * element, target.bytes.data() + d * element);
                     });
      }
    }
    return stats;
  });
}

void CheckpointReader::check_files() const {
  as_checkpoint_error([&] {
    OpenFiles files(folder_);
    for (const ArrayRecord& array : index_.arrays) {
      for (const ShardRecord& shard : array.shards) (void)files.file(array, shard);
    }
  });
}

std::uint64_t CheckpointReader::verify() const {
  return as_checkpoint_error([&] {
    ReadStats stats;
    OpenFiles files(folder_);
    // Each data file's own header must place each shard where the index does: its tensors by
    // name, and where its data starts.
    std::map<std::string, std::pair<std::map<std::string, SafetensorsTensor>, std::uint64_t>>
        headers;
    for (const ArrayRecord& array : index_.arrays) {
      for (const ShardRecord& shard : array.shards) {
        const shardwise::detail::File& file = files.file(array, shard);
        if (shard.chunk_bytes > 0) {
          auto it = headers.find(shard.file);
          if (it == headers.end()) {
            auto [header, data_start] = read_header(file, "'" + echo_input(shard.file, 100) + "'");
            std::map<std::string, SafetensorsTensor> by_name;
            for (SafetensorsTensor& tensor : header.tensors) {
              std::string name = tensor.name;
              by_name.emplace(std::move(name), std::move(tensor));
            }
            it = headers.emplace(shard.file, std::make_pair(std::move(by_name), data_start)).first;
          }
          const auto& [tensors, data_start] = it->second;
          const auto tensor = tensors.find(detail::shard_name(array.name, shard.box));
          if (tensor == tensors.end() || tensor->second.dtype != array.dtype ||
              tensor->second.shape != shape_of(shard.box) ||
              tensor->second.begin + data_start != shard.offset ||
              tensor->second.end - tensor->second.begin != shard.length) {
            throw CheckpointError(where(array, shard) +
                                  ": the file's own header does not hold it where the index says");
          }
        }
        const std::uint64_t chunks =
            shard.chunk_bytes == 0 ? 0 : (shard.length + shard.chunk_bytes - 1) / shard.chunk_bytes;
        ChunkWindow window(file, array, shard, stats, {{0, chunks}});
        std::vector<std::byte> buffer(std::min<std::uint64_t>(shard.length, kWindowBytes));
        for (std::uint64_t at = 0; at < shard.length; at += buffer.size()) {
          const std::uint64_t n = std::min<std::uint64_t>(buffer.size(), shard.length - at);
          window.copy(at, n, buffer.data());
        }
      }
    }
    return stats.bytes_read;
  });
}

void require_arrays(const CheckpointIndex& index, const std::vector<std::string>& wanted,
                    const std::string& what) {
  std::vector<std::string> sorted = wanted;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> missing;
  std::vector<std::string> extra;
  std::size_t i = 0;
  for (const ArrayRecord& array : index.arrays) {
    while (i < sorted.size() && sorted[i] < array.name) missing.push_back(sorted[i++]);
    if (i < sorted.size() && sorted[i] == array.name) {
      ++i;
    } else {
      extra.push_back(array.name);
    }
  }
  while (i < sorted.size()) missing.push_back(sorted[i++]);
  const auto list = [](const std::vector<std::string>& names) {
    std::string text;
    for (std::size_t k = 0; k < names.size() && k < 5; ++k) {
      text += (k > 0 ? ", '" : "'") + echo_input(names[k], 200) + "'";
    }
    if (names.size() > 5) text += " and " + std::to_string(names.size() - 5) + " more";
    return text;
  };
  if (!missing.empty()) {
    throw CheckpointError(what + " lacks " + std::to_string(missing.size()) +
                          " arrays the model needs: " + list(missing));
  }
  if (!extra.empty()) {
    throw CheckpointError(what + " holds " + std::to_string(extra.size()) +
                          " arrays the model does not have: " + list(extra));
  }
}

namespace {
// The runtime's usual timeout: every rank is here at once, none works between the steps.
constexpr std::chrono::milliseconds kAgreementTimeout = CommOptions{}.timeout;
}  // namespace

void throw_unless_all_succeeded(Communicator& comm, const std::string& my_error,
                                const std::string& what) {
  detail::throw_if_any_failed(detail::gather_texts(comm, my_error, kAgreementTimeout), what);
}

void require_same_on_every_rank(Communicator& comm, const std::string& mine,
                                const std::string& what) {
  const std::vector<std::string> every = detail::gather_texts(comm, mine, kAgreementTimeout);
  for (std::size_t r = 1; r < every.size(); ++r) {
    if (every[r] != every[0]) {
      throw CheckpointError(what + ": rank " + std::to_string(r) + " has '" +
                            echo_input(every[r], 200) + "', rank 0 '" + echo_input(every[0], 200) +
                            "'");
    }
  }
}

ReadStats load_checkpoint(Communicator& comm, const CheckpointReader& reader,
                          std::span<const BlockToLoad> targets) {
  ReadStats stats;
  std::string error;
  // Read on a thread of its own while this one answers the others (detail::wait_for_every_rank):
  // a slow disk is not a dead rank, a stopped rank is found within the usual timeout.
  std::atomic<bool> done{false};
  std::thread reading([&] {
    try {
      stats = reader.read(targets);
    } catch (const std::exception& e) {
      error = e.what();
    }
    done.store(true);
  });
  try {
    detail::wait_for_every_rank(
        comm, [&] { return done.load(); }, kAgreementTimeout);
  } catch (...) {
    reading.join();
    throw;
  }
  reading.join();
  detail::throw_if_any_failed(
      detail::gather_texts(comm, error, kAgreementTimeout),
      "checkpoint '" + echo_input(reader.folder().string(), 200) + "' not loaded");
  return stats;
}

}  // namespace shardwise::ckpt

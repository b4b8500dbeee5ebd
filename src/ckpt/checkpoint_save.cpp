#include "shardwise/ckpt/checkpoint_save.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "detail/crc32c.hpp"
#include "detail/file_io.hpp"
#include "rank_texts.hpp"
#include "shard_names.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_folders.hpp"
#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/ckpt/safetensors_file.hpp"
#include "shardwise/core/safetensors.hpp"

namespace shardwise::ckpt {

struct CheckpointSave::Block {
  std::string array;
  Shape shape;
  DType dtype = DType::kF32;
  std::string sharding;
  ShardIndex box;
  int writer = 0;
};

namespace {

nlohmann::json describe(const BlockToSave& block) {
  nlohmann::json box = nlohmann::json::array();
  for (const IndexRange& range : block.box) box.push_back({range.start, range.stop});
  return {{"array", block.array},
          {"shape", block.shape},
          {"dtype", static_cast<int>(block.dtype)},
          {"sharding", block.sharding},
          {"box", box}};
}

std::string error_of(const std::function<void()>& step) {
  try {
    step();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Puts `partial` at `folder`, where nothing is or a checkpoint of run `run_id` is (anything else
// is refused and left as it is). An earlier checkpoint of the run is swapped out in one step
// (renameat2's RENAME_EXCHANGE) and removed after, so that at every moment one whole checkpoint
// is at `folder`; where nothing is there, RENAME_NOREPLACE refuses whatever appeared meanwhile
// (another run's save of the same step) instead of replacing it.
void move_into_place(const std::filesystem::path& partial, const std::filesystem::path& folder,
                     const std::string& run_id) {
  const std::filesystem::path parent = folder.parent_path().empty() ? "." : folder.parent_path();
  const SavePlace place = inspect_save_place(folder, run_id);
  const auto refuse = [&](const std::string& why) {
    throw CheckpointError("'" + echo_input(folder.string(), 200) + "' " + why +
                          "; it is left as it is");
  };
  if (place.occupant == SavePlace::Occupant::kOther) refuse(place.why);
  if (place.occupant == SavePlace::Occupant::kNothing) {
    if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, folder.c_str(), RENAME_NOREPLACE) != 0) {
      const int error = errno;
      if (error == EEXIST || error == ENOTEMPTY) {
        refuse("appeared while this save was written (another run saving into the same folder?)");
      }
      if (error != EINVAL && error != ENOSYS) {
        throw CheckpointError("cannot rename the saved checkpoint into place at " +
                              shardwise::detail::system_error_text(folder, error));
      }
      // No RENAME_NOREPLACE here (NFS): a plain rename, which refuses a folder that is not
      // empty; an empty one appearing in the instant between is the one case it replaces.
      if (shardwise::detail::path_kind(folder) != shardwise::detail::PathKind::kAbsent) {
        refuse("appeared while this save was written (another run saving into the same folder?)");
      }
      if (::rename(partial.c_str(), folder.c_str()) != 0) {
        throw CheckpointError("cannot rename the saved checkpoint into place at " +
                              shardwise::detail::system_error_text(folder, errno));
      }
    }
    shardwise::detail::sync_directory(parent);
    return;
  }
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, folder.c_str(), RENAME_EXCHANGE) == 0) {
    shardwise::detail::sync_directory(parent);
    (void)remove_save_work_folder(partial);  // now the old checkpoint
    return;
  }
  const std::filesystem::path old = save_work_folder(folder, run_id, "old");
  if (auto note = remove_save_work_folder(old)) throw CheckpointError(*note);
  if (::rename(folder.c_str(), old.c_str()) != 0) {
    throw CheckpointError("cannot move the earlier " +
                          shardwise::detail::system_error_text(folder, errno) + " aside");
  }
  if (::rename(partial.c_str(), folder.c_str()) != 0) {
    const int cause = errno;
    (void)::rename(old.c_str(), folder.c_str());
    throw CheckpointError("cannot rename the saved checkpoint into place at " +
                          shardwise::detail::system_error_text(folder, cause));
  }
  shardwise::detail::sync_directory(parent);
  (void)remove_save_work_folder(old);
}

}  // namespace

CheckpointSave::CheckpointSave(Communicator& comm, std::filesystem::path folder,
                               std::span<const BlockToSave> blocks, std::string metadata_json,
                               SaveOptions options)
    : comm_(comm),
      folder_(std::move(folder)),
      metadata_json_(std::move(metadata_json)),
      options_(options) {
  const std::string what = "checkpoint '" + echo_input(folder_.string(), 200) + "' not saved";
  if (options_.chunk_bytes < kMinChunkBytes || options_.chunk_bytes > kMaxChunkBytes) {
    throw InvalidArgument("SaveOptions::chunk_bytes is " + std::to_string(options_.chunk_bytes) +
                          "; expected " + std::to_string(kMinChunkBytes) + " to " +
                          std::to_string(kMaxChunkBytes));
  }
  if (folder_.filename().empty()) folder_ = folder_.parent_path();
  if (!options_.run_id.empty() && !is_run_id(options_.run_id)) {
    throw InvalidArgument("SaveOptions::run_id is '" + echo_input(options_.run_id, 60) +
                          "'; expected 32 lowercase hex digits");
  }
  nlohmann::json mine = nlohmann::json::array();
  for (const BlockToSave& block : blocks) mine.push_back(describe(block));
  // Rank 0's run id, first in its text: every rank saves under it.
  const std::string run = comm_.rank() != 0         ? std::string(32, '0')
                          : options_.run_id.empty() ? new_run_id()
                                                    : options_.run_id;
  const std::vector<std::string> every = detail::gather_texts(
      comm_, run + mine.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      options_.timeout);
  run_id_ = every[0].substr(0, 32);
  partial_ = save_work_folder(folder_, run_id_, "partial");
  // Every rank decides alike, from every rank's descriptions.
  std::map<std::pair<std::string, std::vector<std::int64_t>>, std::size_t> distinct;
  std::map<std::string, std::pair<Shape, DType>> arrays;
  // Per distinct block, the ranks that hold it (in rank order) and the index of the block in
  // each one's list.
  std::vector<std::vector<std::pair<int, std::size_t>>> holders;
  std::string problem;
  for (int r = 0; r < static_cast<int>(every.size()) && problem.empty(); ++r) {
    const nlohmann::json described =
        nlohmann::json::parse(every[static_cast<std::size_t>(r)].substr(32));
    for (std::size_t i = 0; i < described.size() && problem.empty(); ++i) {
      const nlohmann::json& d = described[i];
      Block block{d["array"],
                  d["shape"].get<Shape>(),
                  static_cast<DType>(d["dtype"].get<int>()),
                  d["sharding"],
                  {},
                  r};
      std::vector<std::int64_t> key;
      for (const nlohmann::json& range : d["box"]) {
        block.box.push_back({range[0], range[1]});
        key.push_back(range[0]);
        key.push_back(range[1]);
      }
      const auto [known, fresh] = arrays.try_emplace(block.array, block.shape, block.dtype);
      if (!fresh && (known->second.first != block.shape || known->second.second != block.dtype)) {
        problem = "rank " + std::to_string(r) + " has array '" + echo_input(block.array, 200) +
                  "' as " + to_string(block.shape) + " " + to_string(block.dtype) +
                  ", a lower rank as " + to_string(known->second.first) + " " +
                  to_string(known->second.second);
        break;
      }
      // An empty block holds nothing (an uneven split's last ranks); an array of no elements
      // keeps one.
      if (elements_of(block.box) == 0 && num_elements(block.shape) != 0) continue;
      const auto [at, added] = distinct.try_emplace({block.array, std::move(key)}, blocks_.size());
      if (added) {
        blocks_.push_back(std::move(block));
        holders.emplace_back();
      }
      std::vector<std::pair<int, std::size_t>>& held = holders[at->second];
      if (held.empty() || held.back().first != r) held.emplace_back(r, i);
    }
  }
  if (!problem.empty()) throw CheckpointError(what + ": " + problem);
  // Each distinct block is written once, by its holders in turn (block d by its holder d mod
  // their count), so that replicas share the writing: under plain data parallelism every rank
  // writes a part of the model, not rank 0 all of it.
  for (std::size_t d = 0; d < blocks_.size(); ++d) {
    const auto& [writer, index] = holders[d][d % holders[d].size()];
    blocks_[d].writer = writer;
    if (writer == comm_.rank()) {
      mine_.push_back(index);
      mine_distinct_.push_back(d);
    }
  }
  // The blocks must tile every array: checked on the index they would make.
  {
    CheckpointIndex planned;
    std::map<std::string, ArrayRecord> records = array_records();
    for (const Block& block : blocks_) {
      records[block.array].shards.push_back(
          {block.box, "planned", 0, elements_of(block.box) * size_in_bytes(block.dtype), 0, {}});
    }
    for (auto& [name, record] : records) planned.arrays.push_back(std::move(record));
    // Offsets are not known yet: each shard alone in a file of its own name for the check.
    std::size_t n = 0;
    for (ArrayRecord& record : planned.arrays) {
      for (ShardRecord& shard : record.shards) shard.file = "planned-" + std::to_string(n++);
    }
    try {
      check_consistent(planned, "the ranks' blocks");
    } catch (const CheckpointError& e) {
      throw CheckpointError(what + ": " + e.what());
    }
  }
  std::string mine_error;
  if (comm_.rank() == 0) {
    mine_error = error_of([&] {
      std::error_code error;
      // Only a checkpoint of this run is ever replaced: anything else at the path is left.
      const SavePlace place = inspect_save_place(folder_, run_id_);
      if (place.occupant == SavePlace::Occupant::kOther) {
        throw CheckpointError("'" + echo_input(folder_.string(), 200) + "' " + place.why +
                              "; it is left as it is");
      }
      // What an interrupted save of this run left (its name holds the run's id).
      if (auto note = remove_save_work_folder(partial_)) {
        throw CheckpointError("an earlier save's " + *note);
      }
      if (!folder_.parent_path().empty()) {
        std::filesystem::create_directories(folder_.parent_path(), error);
      }
      if (::mkdir(partial_.c_str(), 0755) != 0) {
        throw CheckpointError("cannot make the folder " +
                              shardwise::detail::system_error_text(partial_, errno));
      }
      made_partial_ = true;
    });
  }
  // No destructor runs for an object whose constructor throws: the folder made above is
  // removed here when a later step fails (a peer that failed or aborted meanwhile too).
  try {
    detail::throw_if_any_failed(detail::gather_texts(comm_, mine_error, options_.timeout), what);
    // Ranks on other hosts must see rank 0's folder: a save needs a file system they share.
    std::error_code seen;
    if (!std::filesystem::is_directory(partial_, seen)) {
      mine_error = "cannot see the folder '" + echo_input(partial_.string(), 200) +
                   "' rank 0 made; a save needs a folder every rank's host shares";
    }
    detail::throw_if_any_failed(detail::gather_texts(comm_, mine_error, options_.timeout), what);
  } catch (...) {
    remove_partial();
    throw;
  }
}

CheckpointSave::~CheckpointSave() {
  if (writer_.joinable()) writer_.join();
  remove_partial();
}

void CheckpointSave::remove_partial() noexcept {
  if (!made_partial_) return;
  made_partial_ = false;
  // Best effort: a peer still writing may add a file after the removal; the run's next save
  // removes what is left (remove_leftovers). Only the files a save writes are removed.
  try {
    (void)remove_save_work_folder(partial_);
  } catch (...) {  // noexcept: what is left stays for the next save
  }
}

void CheckpointSave::write_in_background(std::vector<std::span<const std::byte>> bytes) {
  if (writer_.joinable()) throw InvalidArgument("CheckpointSave: written twice");
  written_.store(false);
  write_started_.store(true);
  background_bytes_ = std::move(bytes);
  writer_ = std::thread([this] { write(background_bytes_); });
}

bool CheckpointSave::every_rank_wrote() {
  std::int32_t mine = written_.load() ? 1 : 0;
  std::int32_t all = 0;
  AllReduceOptions options;
  options.timeout = options_.timeout;
  comm_.all_reduce(&mine, &all, 1, DType::kI32, ReduceOp::kMin, world_group(comm_.size()), options);
  return all == 1;
}

std::map<std::string, ArrayRecord> CheckpointSave::array_records() const {
  std::map<std::string, ArrayRecord> records;
  for (const Block& block : blocks_) {
    ArrayRecord& record = records[block.array];
    record.name = block.array;
    record.shape = block.shape;
    record.dtype = block.dtype;
    record.sharding = block.sharding;
  }
  return records;
}

void CheckpointSave::write(std::span<const std::span<const std::byte>> bytes) noexcept {
  write_started_.store(true);
  const auto start = std::chrono::steady_clock::now();
  try {
    if (bytes.size() != mine_.size()) {
      throw CheckpointError("write() got " + std::to_string(bytes.size()) + " blocks for " +
                            std::to_string(mine_.size()));
    }
    if (mine_.empty()) return;
    // The safetensors header: each block a tensor named by its array and box.
    std::vector<SafetensorsEntry> entries;
    for (std::size_t k = 0; k < mine_.size(); ++k) {
      const Block& block = blocks_[mine_distinct_[k]];
      entries.push_back(
          {detail::shard_name(block.array, block.box), block.dtype, shape_of(block.box), bytes[k]});
    }
    const std::string header = safetensors_header_bytes(entries, {{"format", "shardwise-shards"}});
    const std::filesystem::path path = partial_ / detail::shard_file_name(comm_.rank());
    shardwise::detail::File file(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW);
    file.write_all(header.data(), header.size());
    std::uint64_t offset = header.size();
    stats_.bytes_written = offset;
    // The checksums are computed on a second thread while this one writes the same bytes: the
    // write waits on the disk, the CRC on the CPU, and neither needs the other.
    std::vector<std::vector<std::uint32_t>> crcs(mine_.size());
    std::thread checksums([&] {
      for (std::size_t k = 0; k < mine_.size(); ++k) {
        for (std::size_t at = 0; at < bytes[k].size(); at += options_.chunk_bytes) {
          const std::size_t n = std::min<std::size_t>(options_.chunk_bytes, bytes[k].size() - at);
          crcs[k].push_back(shardwise::detail::crc32c(bytes[k].data() + at, n));
        }
      }
    });
    try {
      for (std::size_t k = 0; k < mine_.size(); ++k)
        file.write_all(bytes[k].data(), bytes[k].size());
    } catch (...) {
      checksums.join();
      throw;
    }
    checksums.join();
    for (std::size_t k = 0; k < mine_.size(); ++k) {
      records_ += nlohmann::json{{"block", mine_distinct_[k]},
                                 {"offset", offset},
                                 {"length", bytes[k].size()},
                                 {"chunk_bytes", options_.chunk_bytes},
                                 {"crc32c", crcs[k]}}
                      .dump() +
                  "\n";
      offset += bytes[k].size();
      stats_.bytes_written += bytes[k].size();
    }
    file.sync();
    file.close();
  } catch (const std::exception& e) {
    error_ = e.what();
  } catch (...) {
    error_ = "an unknown failure";
  }
  stats_.write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  written_.store(true);
}

SaveStats CheckpointSave::commit() {
  const std::string what = "checkpoint '" + echo_input(folder_.string(), 200) + "' not saved";
  // write() on a thread of the caller's may still be under way (it is waited for); one never
  // begun is the caller's mistake, reported rather than waited for forever.
  if (!writer_.joinable() && !write_started_.load()) {
    if (!mine_.empty()) error_ = "commit() before write()";
    written_.store(true);
  }
  detail::wait_for_every_rank(
      comm_, [this] { return written_.load(); }, options_.timeout);
  if (writer_.joinable()) writer_.join();
  const nlohmann::json mine{{"error", error_}, {"records", records_}};
  // An error message may hold a path's bytes that are not UTF-8: replaced, not thrown on.
  const std::vector<std::string> every = detail::gather_texts(
      comm_, mine.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), options_.timeout);
  std::vector<std::string> errors;
  for (const std::string& text : every) errors.push_back(nlohmann::json::parse(text)["error"]);
  std::string outcome;
  const bool all_wrote =
      std::all_of(errors.begin(), errors.end(), [](const std::string& e) { return e.empty(); });
  if (comm_.rank() == 0) {
    if (!all_wrote) {
      remove_partial();
    } else {
      outcome = error_of([&] {
        std::map<std::string, ArrayRecord> arrays = array_records();
        for (std::size_t r = 0; r < every.size(); ++r) {
          const std::string records = nlohmann::json::parse(every[r])["records"];
          std::size_t at = 0;
          while (at < records.size()) {
            const std::size_t end = records.find('\n', at);
            const nlohmann::json line = nlohmann::json::parse(records.substr(at, end - at));
            at = end + 1;
            const Block& block = blocks_[line["block"].get<std::size_t>()];
            arrays[block.array].shards.push_back(
                {block.box, detail::shard_file_name(static_cast<int>(r)), line["offset"],
                 line["length"], line["chunk_bytes"],
                 line["crc32c"].get<std::vector<std::uint32_t>>()});
          }
        }
        CheckpointIndex index;
        index.metadata_json = metadata_json_;
        index.run_id = run_id_;
        index.ancestors = options_.ancestors;
        for (auto& [name, record] : arrays) {
          index.arrays.push_back(std::move(record));
        }
        check_consistent(index, "the index being saved");
        const std::string text = checkpoint_index_json(index);
        shardwise::detail::File file(partial_ / kIndexFileName,
                                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW);
        file.write_all(text.data(), text.size());
        file.sync();
        file.close();
        shardwise::detail::sync_directory(partial_);
        move_into_place(partial_, folder_, run_id_);
        made_partial_ = false;
      });
      if (!outcome.empty()) remove_partial();
    }
  }
  detail::throw_if_any_failed(errors, what);
  detail::throw_if_any_failed(detail::gather_texts(comm_, outcome, options_.timeout), what);
  committed_ = true;
  for (const Block& block : blocks_) {
    stats_.bytes_total += elements_of(block.box) * size_in_bytes(block.dtype);
  }
  return stats_;
}

SaveStats save_checkpoint(Communicator& comm, const std::filesystem::path& folder,
                          std::span<const BlockToSave> blocks, const std::string& metadata_json,
                          const SaveOptions& options) {
  CheckpointSave save(comm, folder, blocks, metadata_json, options);
  std::vector<std::span<const std::byte>> bytes;
  for (const std::size_t i : save.written_here()) bytes.push_back(blocks[i].bytes);
  save.write_in_background(std::move(bytes));
  return save.commit();
}

}  // namespace shardwise::ckpt

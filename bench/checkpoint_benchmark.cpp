// Checkpoint save and load throughput against a plain sequential write and read of the same
// bytes on the same disk, in the same run.
//
//   checkpoint_benchmark FOLDER [MEGABYTES=512] [RANKS=2] [ROUNDS=3]
//
// The state is 16 float arrays of MEGABYTES in all, each split by rows over RANKS in-process
// ranks. Per round, in this order:
//   baseline write  one thread writes every byte to one file (64 MiB writes), fsync
//   save            save_checkpoint from every rank (its own file, CRC-32C per MiB, index, renames)
//   baseline read   one thread reads that file back (64 MiB reads)
//   load rows       every rank loads its rows (the layout it saved)
//   load columns    every rank loads a split by columns (strided: each shard read in part)
// Before each read the files' pages are dropped from the page cache (POSIX_FADV_DONTNEED), so
// reads come from the disk, as after a restart. Prints one JSON object per round and the median
// ratios (shardwise throughput / baseline throughput).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/ckpt/checkpoint_save.hpp"
#include "shardwise/comm/run_local.hpp"

namespace {

using namespace shardwise;
using Clock = std::chrono::steady_clock;

constexpr int kArrays = 16;
constexpr std::int64_t kColumns = 1024;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void drop_cache(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(path)) {
    for (const auto& entry : std::filesystem::directory_iterator(path)) drop_cache(entry.path());
    return;
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::exit(1);
  }
}

ShardIndex rows_box(std::int64_t rows, int rank, int ranks) {
  return {{rows * rank / ranks, rows * (rank + 1) / ranks}, {0, kColumns}};
}

ShardIndex columns_box(std::int64_t rows, int rank, int ranks) {
  return {{0, rows}, {kColumns * rank / ranks, kColumns * (rank + 1) / ranks}};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: checkpoint_benchmark FOLDER [MEGABYTES] [RANKS] [ROUNDS]\n");
    return 2;
  }
  const std::filesystem::path folder = argv[1];
  const std::int64_t megabytes = argc > 2 ? std::stoll(argv[2]) : 512;
  const int ranks = argc > 3 ? std::stoi(argv[3]) : 2;
  const int rounds = argc > 4 ? std::stoi(argv[4]) : 3;
  const std::int64_t rows = megabytes * 1'000'000 / kArrays / kColumns / 4;
  const auto bytes = static_cast<std::size_t>(kArrays * rows * kColumns * 4);
  std::filesystem::create_directories(folder);

  // Every rank's blocks, filled once.
  std::vector<std::vector<std::vector<float>>> state(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (int a = 0; a < kArrays; ++a) {
      const ShardIndex box = rows_box(rows, r, ranks);
      std::vector<float> block(static_cast<std::size_t>((box[0].stop - box[0].start) * kColumns));
      for (std::size_t i = 0; i < block.size(); ++i)
        block[i] = static_cast<float>(i % 977) * 0.5F + a;
      state[static_cast<std::size_t>(r)].push_back(std::move(block));
    }
  }
  std::vector<char> plain(bytes);
  std::size_t at = 0;
  for (const auto& rank_blocks : state) {
    for (const auto& block : rank_blocks) {
      std::memcpy(plain.data() + at, block.data(), block.size() * 4);
      at += block.size() * 4;
    }
  }

  std::vector<double> save_ratio, rows_ratio, columns_ratio;
  for (int round = 0; round < rounds; ++round) {
    const std::filesystem::path baseline = folder / "baseline.bin";
    const std::filesystem::path checkpoint = folder / "checkpoint";
    std::filesystem::remove_all(checkpoint);
    std::filesystem::remove(baseline);

    auto start = Clock::now();
    {
      const int fd = ::open(baseline.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      check(fd >= 0, "open");
      for (std::size_t done = 0; done < bytes;) {
        const ssize_t n =
            ::write(fd, plain.data() + done, std::min<std::size_t>(64 << 20, bytes - done));
        check(n > 0, "write");
        done += static_cast<std::size_t>(n);
      }
      check(::fsync(fd) == 0, "fsync");
      ::close(fd);
    }
    const double write_seconds = seconds_since(start);

    double save_seconds = 0;
    run_local(ranks, [&](Communicator& comm) {
      std::vector<ckpt::BlockToSave> blocks;
      for (int a = 0; a < kArrays; ++a) {
        const auto& block =
            state[static_cast<std::size_t>(comm.rank())][static_cast<std::size_t>(a)];
        blocks.push_back({"array" + std::to_string(a),
                          {rows, kColumns},
                          DType::kF32,
                          "rows",
                          rows_box(rows, comm.rank(), ranks),
                          std::as_bytes(std::span(block))});
      }
      comm.barrier(world_group(comm.size()));
      const auto begin = Clock::now();
      ckpt::save_checkpoint(comm, checkpoint, blocks, "{}");
      if (comm.rank() == 0) save_seconds = seconds_since(begin);
    });

    drop_cache(baseline);
    start = Clock::now();
    {
      const int fd = ::open(baseline.c_str(), O_RDONLY);
      check(fd >= 0, "open");
      for (std::size_t done = 0; done < bytes;) {
        const ssize_t n =
            ::read(fd, plain.data() + done, std::min<std::size_t>(64 << 20, bytes - done));
        check(n > 0, "read");
        done += static_cast<std::size_t>(n);
      }
      ::close(fd);
    }
    const double read_seconds = seconds_since(start);

    double load_seconds[2] = {0, 0};
    for (int layout = 0; layout < 2; ++layout) {
      drop_cache(checkpoint);
      run_local(ranks, [&](Communicator& comm) {
        const ShardIndex box = layout == 0 ? rows_box(rows, comm.rank(), ranks)
                                           : columns_box(rows, comm.rank(), ranks);
        std::vector<std::vector<float>> into(
            kArrays, std::vector<float>(static_cast<std::size_t>(num_elements(shape_of(box)))));
        std::vector<ckpt::BlockToLoad> targets;
        for (int a = 0; a < kArrays; ++a) {
          targets.push_back({"array" + std::to_string(a),
                             {rows, kColumns},
                             DType::kF32,
                             box,
                             std::as_writable_bytes(std::span(into[static_cast<std::size_t>(a)]))});
        }
        comm.barrier(world_group(comm.size()));
        const auto begin = Clock::now();
        const ckpt::CheckpointReader reader(checkpoint);
        ckpt::load_checkpoint(comm, reader, targets);
        if (comm.rank() == 0) load_seconds[layout] = seconds_since(begin);
      });
    }
    const double mb = static_cast<double>(bytes) / 1e6;
    std::printf(
        "{\"round\": %d, \"megabytes\": %.0f, \"ranks\": %d, \"baseline_write_mb_s\": %.0f, "
        "\"save_mb_s\": %.0f, \"baseline_read_mb_s\": %.0f, \"load_rows_mb_s\": %.0f, "
        "\"load_columns_mb_s\": %.0f}\n",
        round, mb, ranks, mb / write_seconds, mb / save_seconds, mb / read_seconds,
        mb / load_seconds[0], mb / load_seconds[1]);
    save_ratio.push_back(write_seconds / save_seconds);
    rows_ratio.push_back(read_seconds / load_seconds[0]);
    columns_ratio.push_back(read_seconds / load_seconds[1]);
  }
  std::printf(
      "{\"median_save_ratio\": %.2f, \"median_load_rows_ratio\": %.2f, "
      "\"median_load_columns_ratio\": %.2f}\n",
      median(save_ratio), median(rows_ratio), median(columns_ratio));
  std::filesystem::remove_all(folder / "checkpoint");
  std::filesystem::remove(folder / "baseline.bin");
  return 0;
}

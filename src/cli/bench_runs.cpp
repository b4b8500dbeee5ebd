#include "bench_runs.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "shardwise/array/placement_ops.hpp"
#include "shardwise/array/transfer_plan.hpp"
#include "shardwise/core/error.hpp"
#ifdef SHARDWISE_HAVE_MPI
#include "mpi_baseline.hpp"
#endif

namespace shardwise::cli {
namespace {

using Clock = std::chrono::steady_clock;

double gbps(std::int64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

constexpr int kRounds = 3;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Enough calls to take a measurable time, bounded for the largest sizes.
int iterations_for(std::int64_t bytes) {
  return static_cast<int>(std::clamp<std::int64_t>(
      (std::int64_t{256} << 20) / std::max<std::int64_t>(bytes, 1), 3, 200));
}

// Seconds per call of `call` on every rank at once (barriers around the timed loop).
template <typename F>
double time_collectively(Communicator& comm, int iterations, F&& call) {
  const Group world = world_group(comm.size());
  call();
  comm.barrier(world);
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) call();
  comm.barrier(world);
  return std::chrono::duration<double>(Clock::now() - start).count() / iterations;
}

// Seconds per memcpy of `bytes` when every rank copies at the same time (barriers around).
double memcpy_on_every_rank(Communicator& comm, std::int64_t bytes, int iterations) {
  std::vector<std::byte> from(static_cast<std::size_t>(bytes), std::byte{1});
  std::vector<std::byte> to(static_cast<std::size_t>(bytes));
  return time_collectively(comm, iterations,
                           [&] { std::memcpy(to.data(), from.data(), from.size()); });
}

}  // namespace

double bus_factor(const std::string& op, int ranks) {
  const double n = ranks;
  if (op == "all_reduce") return 2 * (n - 1) / n;
  if (op == "broadcast") return 1;
  return (n - 1) / n;
}

std::vector<CommBenchRow> bench_collectives(Communicator& comm, const std::vector<std::string>& ops,
                                            const std::vector<std::int64_t>& sizes,
                                            bool with_raw_mpi) {
  const int n = comm.size();
  const Group world = world_group(n);
  std::vector<CommBenchRow> rows;
  for (std::int64_t bytes : sizes) {
    const std::size_t count = static_cast<std::size_t>(bytes) / sizeof(float);
    const std::size_t per_rank = count / static_cast<std::size_t>(n);
    std::vector<float> in(std::max<std::size_t>(count, 1), 1.0F);
    std::vector<float> out(std::max<std::size_t>(count, 1));
    const int iterations = iterations_for(bytes);
    for (const std::string& op : ops) {
      std::function<void()> call;
      // All-reduce and all-gather run in place, as nccl-tests' in-place rows: a rank's own
      // block is not copied to itself. All-to-all runs both ways.
      if (op == "all_reduce") {
        call = [&] {
          comm.all_reduce(out.data(), out.data(), count, DType::kF32, ReduceOp::kSum, world);
        };
      } else if (op == "all_gather") {
        const float* own = out.data() + static_cast<std::size_t>(comm.rank()) * per_rank;
        call = [&, own] { comm.all_gather(own, out.data(), per_rank, DType::kF32, world); };
      } else if (op == "reduce_scatter") {
        call = [&] {
          comm.reduce_scatter(in.data(), out.data(), per_rank, DType::kF32, ReduceOp::kSum, world);
        };
      } else if (op == "all_to_all") {
        call = [&] { comm.all_to_all(in.data(), out.data(), per_rank, DType::kF32, world); };
      } else if (op == "all_to_all_in_place") {
        call = [&] { comm.all_to_all(out.data(), out.data(), per_rank, DType::kF32, world); };
      } else if (op == "broadcast") {
        call = [&] { comm.broadcast(in.data(), count, DType::kF32, 0, world); };
      } else {
        throw InvalidArgument("--ops: '" + op +
                              "' is not one of all_reduce, all_gather, reduce_scatter, "
                              "all_to_all, all_to_all_in_place, broadcast");
      }
      // The bytes one rank moves at bus bandwidth, copied by every rank at once.
      const auto moved = static_cast<std::int64_t>(static_cast<double>(bytes) * bus_factor(op, n));
      // The operation and its baselines take turns, and each reports its median round: a
      // burst of noise on this shared machine then hits all of them or none.
      std::vector<double> seconds;
      std::vector<double> copy_seconds;
      std::vector<double> raw_seconds;
      for (int round = 0; round < kRounds; ++round) {
        seconds.push_back(time_collectively(comm, iterations, call));
        copy_seconds.push_back(
            memcpy_on_every_rank(comm, std::max<std::int64_t>(moved, 1), iterations));
#ifdef SHARDWISE_HAVE_MPI
        if (with_raw_mpi) {
          raw_seconds.push_back(
              bench::raw_mpi_seconds(op, static_cast<std::size_t>(bytes), iterations));
        }
#else
        (void)with_raw_mpi;
#endif
      }
      const double time = median(seconds);
      CommBenchRow row{op, comm.backend(), n, bytes, time, gbps(bytes, time), 0, 0, {}};
      row.busbw_gbps = row.algbw_gbps * bus_factor(op, n);
      row.memcpy_gbps = gbps(moved, median(copy_seconds));
      if (!raw_seconds.empty()) {
        row.mpi_raw_busbw_gbps = gbps(bytes, median(raw_seconds)) * bus_factor(op, n);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::vector<ReshardBenchRow> bench_reshards(Communicator& comm, std::int64_t bytes) {
  const int n = comm.size();
  if (n % 2 != 0)
    throw InvalidArgument("bench reshard needs an even number of ranks, got " + std::to_string(n));
  const Mesh mesh({"data", "model"}, {2, n / 2});
  const std::int64_t columns = 64 * n;
  const Shape shape{bytes / 4 / columns, columns};
  std::vector<NamedSharding> shardings;
  for (const P& spec : {P(), P{"data"}, P{"model"}, P{"data", "model"}, P{"model", "data"},
                        P{None, {"data", "model"}}}) {
    shardings.emplace_back(mesh, spec);
  }
  std::vector<float> host(static_cast<std::size_t>(num_elements(shape)), 1.0F);
  std::vector<ReshardBenchRow> rows;
  for (const NamedSharding& from : shardings) {
    const ShardedArray source = shard_replicated(comm, host.data(), shape, DType::kF32, from);
    for (const NamedSharding& to : shardings) {
      std::int64_t most = 0;
      const std::vector<Transfer> plan = plan_transfers(from, to, shape);
      std::vector<std::int64_t> received(static_cast<std::size_t>(n), 0);
      for (const Transfer& t : plan) {
        if (t.from != t.to)
          received[static_cast<std::size_t>(t.to)] += num_elements(shape_of(t.box)) * 4;
      }
      most = *std::max_element(received.begin(), received.end());
      std::int64_t written = 0;
      for (const DeviceShard& shard : to.devices_indices_map(shape)) {
        written = std::max(written, num_elements(shape_of(shard.index)) * 4);
      }
      // Into a target allocated once, as a training step would: the time is the data movement,
      // not the allocation of fresh pages.
      ShardedArray target = reshard(comm, source, to);
      std::vector<double> seconds;
      std::vector<double> moved_copy;
      std::vector<double> written_copy;
      for (int round = 0; round < kRounds; ++round) {
        seconds.push_back(time_collectively(comm, 2, [&] { reshard_into(comm, source, target); }));
        if (most > 0) moved_copy.push_back(memcpy_on_every_rank(comm, most, 2));
        written_copy.push_back(memcpy_on_every_rank(comm, std::max<std::int64_t>(written, 1), 2));
      }
      ReshardBenchRow row;
      row.from = from.spec().to_string();
      row.to = to.spec().to_string();
      row.backend = comm.backend();
      row.ranks = n;
      row.array_bytes = num_elements(shape) * 4;
      row.max_rank_bytes = most;
      row.max_rank_written_bytes = written;
      row.seconds = median(seconds);
      row.reshard_gbps = gbps(most, row.seconds);
      if (most > 0) row.memcpy_gbps = gbps(most, median(moved_copy));
      row.written_memcpy_seconds = median(written_copy);
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace shardwise::cli

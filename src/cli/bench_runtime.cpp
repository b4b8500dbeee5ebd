#include "bench_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "shardwise/array/placement_ops.hpp"
#include "shardwise/array/resharder.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRounds = 5;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Seconds per call of `call` on every rank at once, median of the rounds; `world` is the
// communicator the barriers around each round run on.
double timed(Communicator& comm, int iterations, const std::function<void()>& call) {
  const Group world = world_group(comm.size());
  call();
  std::vector<double> rounds;
  for (int round = 0; round < kRounds; ++round) {
    comm.barrier(world);
    const auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) call();
    comm.barrier(world);
    rounds.push_back(seconds_since(start) / iterations);
  }
  return median(rounds);
}

// Seconds per call of `a` and of `b`, whose rounds take turns (so that a burst of noise on a
// shared machine hits both or neither), medians of the rounds.
std::pair<double, double> timed_in_turns(Communicator& comm, int iterations,
                                         const std::function<void()>& a,
                                         const std::function<void()>& b) {
  const Group world = world_group(comm.size());
  a();
  b();
  std::vector<double> rounds_a;
  std::vector<double> rounds_b;
  for (int round = 0; round < kRounds; ++round) {
    // Which goes first alternates too: the first after a pause can pay for waking threads.
    const auto first = round % 2 == 0 ? std::pair{&a, &rounds_a} : std::pair{&b, &rounds_b};
    const auto second = round % 2 == 0 ? std::pair{&b, &rounds_b} : std::pair{&a, &rounds_a};
    for (auto [call, rounds] : {first, second}) {
      comm.barrier(world);
      const auto start = Clock::now();
      for (int i = 0; i < iterations; ++i) (*call)();
      comm.barrier(world);
      rounds->push_back(seconds_since(start) / iterations);
    }
  }
  return {median(rounds_a), median(rounds_b)};
}

// Arithmetic the compiler cannot drop, in steps.
class ComputeLoop {
 public:
  void step() {
    for (int k = 0; k < 256; ++k) value_ = value_ * 1.0000001 + 1e-9;
  }
  [[nodiscard]] double value() const { return value_; }

 private:
  double value_ = 1.0;
};

RuntimeBenchRow overlap_row(Communicator& comm, std::int64_t bytes) {
  const Group world = world_group(comm.size());
  const auto count = static_cast<std::size_t>(bytes) / sizeof(float);
  std::vector<float> buffer(count, 1.0F);
  const double communicate = timed(comm, 3, [&] {
    comm.all_reduce(buffer.data(), buffer.data(), count, DType::kF32, ReduceOp::kSum, world);
  });
  // As many compute steps as the all-reduce takes, on this rank.
  ComputeLoop loop;
  const auto calibrate = Clock::now();
  std::int64_t steps_per_calibration = 0;
  while (seconds_since(calibrate) < 0.02) {
    loop.step();
    ++steps_per_calibration;
  }
  const auto steps =
      static_cast<std::int64_t>(static_cast<double>(steps_per_calibration) * communicate / 0.02);
  const double compute = timed(comm, 3, [&] {
    for (std::int64_t s = 0; s < steps; ++s) loop.step();
  });
  const double both = timed(comm, 3, [&] {
    Work work =
        comm.iall_reduce(buffer.data(), buffer.data(), count, DType::kF32, ReduceOp::kSum, world);
    for (std::int64_t s = 0; s < steps; ++s) {
      loop.step();
      if (s % 64 == 0) (void)work.test();  // the MPI backend progresses inside MPI calls
    }
    work.wait();
  });
  RuntimeBenchRow row;
  row.name = "overlap all_reduce";
  row.bytes = bytes;
  row.seconds = both;
  row.baseline_seconds = communicate + compute;
  // The share of the all-reduce's time that the compute loop hid.
  row.ratio = std::clamp((communicate + compute - both) / communicate, 0.0, 1.0);
  row.note = "communicate " + std::to_string(communicate * 1e3) + " ms, compute " +
             std::to_string(compute * 1e3) + " ms, both " + std::to_string(both * 1e3) + " ms" +
             (loop.value() > 0 ? "" : "!");
  return row;
}

// An FSDP gather along 'model' of a 2 x n/2 mesh (a cached reshard P('model') -> P()) against
// the bare all-gather of the same bytes on the 'model' sub-communicator.
RuntimeBenchRow axis_gather_row(Communicator& comm, Resharder& resharder, std::int64_t bytes) {
  const int n = comm.size();
  const Mesh mesh({"data", "model"}, {2, n / 2});
  const Shape shape{bytes / 4};
  std::vector<float> host(static_cast<std::size_t>(bytes / 4), 1.0F);
  const ShardedArray shards =
      shard_replicated(comm, host.data(), shape, DType::kF32, NamedSharding(mesh, P{"model"}));
  ShardedArray whole =
      ShardedArray::allocate(NamedSharding(mesh, P()), shape, DType::kF32, comm.rank());
  const int iterations = static_cast<int>(std::clamp<std::int64_t>((256 << 20) / bytes, 3, 400));
  comm.counters().clear();
  resharder.reshard_into(shards, whole);
  const ByteCount moved = comm.counters().total();
  const bool only_model = moved == comm.counters().for_axes("model");
  std::unique_ptr<Communicator> model = comm.split(mesh, {"model"});
  const Group members = world_group(model->size());
  const auto block = shards.local_bytes().size() / 4;
  std::vector<float> out(block * static_cast<std::size_t>(model->size()));
  const auto [reshard, bare] = timed_in_turns(
      comm, iterations, [&] { resharder.reshard_into(shards, whole); },
      [&] {
        model->all_gather(shards.local_bytes().data(), out.data(), block, DType::kF32, members);
      });
  RuntimeBenchRow row;
  row.name = "axis all_gather (cached reshard vs bare on the sub-communicator)";
  row.bytes = bytes;
  row.seconds = reshard;
  row.baseline_seconds = bare;
  row.ratio = bare / reshard;
  row.note = only_model ? "bytes only along 'model'" : "BYTES ON OTHER AXES";
  return row;
}

// Shard(1) -> Shard(0) along 'model' (a cached reshard) against the bare all-to-all of the same
// bytes on the 'model' sub-communicator.
RuntimeBenchRow axis_all_to_all_row(Communicator& comm, Resharder& resharder, std::int64_t bytes) {
  const int n = comm.size();
  const int m = n / 2;
  const Mesh mesh({"data", "model"}, {2, m});
  const std::int64_t side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(bytes / 4)));
  const std::int64_t edge = std::max<std::int64_t>(m, side / m * m);
  const Shape shape{edge, edge};
  std::vector<float> host(static_cast<std::size_t>(edge * edge), 1.0F);
  const ShardedArray columns = shard_replicated(comm, host.data(), shape, DType::kF32,
                                                NamedSharding(mesh, P{None, "model"}));
  ShardedArray rows = ShardedArray::allocate(NamedSharding(mesh, P{"model", None}), shape,
                                             DType::kF32, comm.rank());
  const int iterations = static_cast<int>(std::clamp<std::int64_t>((256 << 20) / bytes, 3, 400));
  std::unique_ptr<Communicator> model = comm.split(mesh, {"model"});
  const std::size_t piece = columns.local_bytes().size() / 4 / static_cast<std::size_t>(m);
  std::vector<float> in(piece * static_cast<std::size_t>(m), 1.0F);
  std::vector<float> out(in.size());
  const auto [reshard, bare] = timed_in_turns(
      comm, iterations, [&] { resharder.reshard_into(columns, rows); },
      [&] { model->all_to_all(in.data(), out.data(), piece, DType::kF32, world_group(m)); });
  RuntimeBenchRow row;
  row.name = "axis all_to_all (cached reshard vs bare on the sub-communicator)";
  row.bytes = edge * edge * 4;
  row.seconds = reshard;
  row.baseline_seconds = bare;
  row.ratio = bare / reshard;
  return row;
}

// reshard (allocating its result) against reshard_into an existing array, [S0,S1] -> [S1,S0].
RuntimeBenchRow allocate_row(Communicator& comm, Resharder& resharder, std::int64_t bytes) {
  const int n = comm.size();
  const Mesh mesh({"data", "model"}, {2, n / 2});
  const std::int64_t columns = 64 * n;
  const Shape shape{bytes / 4 / columns, columns};
  std::vector<float> host(static_cast<std::size_t>(num_elements(shape)), 1.0F);
  const ShardedArray source = shard_replicated(comm, host.data(), shape, DType::kF32,
                                               NamedSharding(mesh, P{"data", "model"}));
  const NamedSharding target(mesh, P{"model", "data"});
  ShardedArray into = resharder.reshard(source, target);
  const auto [allocating, existing] = timed_in_turns(
      comm, 2, [&] { (void)resharder.reshard(source, target); },
      [&] { resharder.reshard_into(source, into); });
  RuntimeBenchRow row;
  row.name = "reshard / reshard_into";
  row.bytes = num_elements(shape) * 4;
  row.seconds = allocating;
  row.baseline_seconds = existing;
  row.ratio = allocating / existing;
  return row;
}

}  // namespace

std::vector<RuntimeBenchRow> bench_runtime(Communicator& comm, std::int64_t overlap_bytes,
                                           std::int64_t reshard_bytes) {
  if (comm.size() % 2 != 0) {
    throw InvalidArgument("bench runtime needs an even number of ranks (a 2 x n/2 mesh), got " +
                          std::to_string(comm.size()));
  }
  std::vector<RuntimeBenchRow> rows;
  Resharder resharder(comm);
  rows.push_back(overlap_row(comm, overlap_bytes));
  for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{16} << 20}) {
    rows.push_back(axis_gather_row(comm, resharder, bytes));
    rows.push_back(axis_all_to_all_row(comm, resharder, bytes));
  }
  rows.push_back(allocate_row(comm, resharder, reshard_bytes));
  for (RuntimeBenchRow& row : rows) {
    row.backend = comm.backend();
    row.ranks = comm.size();
  }
  return rows;
}

}  // namespace shardwise::cli

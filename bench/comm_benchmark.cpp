// Collectives and resharding on the local backend, as Google Benchmark cases. Each iteration
// runs `ranks` threads through one collective; bytes processed are the nccl-tests size.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "shardwise/array/placement_ops.hpp"
#include "shardwise/comm/run_local.hpp"

namespace {

using namespace shardwise;

void all_reduce(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  for (auto _ : state) {
    run_local(ranks, [&](Communicator& comm) {
      std::vector<float> buffer(bytes / sizeof(float), 1.0F);
      comm.all_reduce(buffer.data(), buffer.data(), buffer.size(), DType::kF32, ReduceOp::kSum,
                      world_group(ranks));
      benchmark::DoNotOptimize(buffer.data());
    });
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void all_gather(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  for (auto _ : state) {
    run_local(ranks, [&](Communicator& comm) {
      std::vector<float> out(bytes / sizeof(float));
      const std::size_t per_rank = out.size() / static_cast<std::size_t>(ranks);
      comm.all_gather(out.data() + per_rank * static_cast<std::size_t>(comm.rank()), out.data(),
                      per_rank, DType::kF32, world_group(ranks));
      benchmark::DoNotOptimize(out.data());
    });
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void memcpy_baseline(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(1));
  std::vector<std::byte> from(bytes, std::byte{1});
  std::vector<std::byte> to(bytes);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void reshard_rows_to_columns(benchmark::State& state) {
  const auto bytes = state.range(1);
  const Mesh mesh({"data", "model"}, {2, 4});
  const Shape shape{bytes / 4 / 512, 512};
  std::vector<float> host(static_cast<std::size_t>(num_elements(shape)), 1.0F);
  for (auto _ : state) {
    run_local(8, [&](Communicator& comm) {
      const ShardedArray rows = shard_replicated(comm, host.data(), shape, DType::kF32,
                                                 NamedSharding(mesh, P{{"data", "model"}}));
      benchmark::DoNotOptimize(
          reshard(comm, rows, NamedSharding(mesh, P{None, {"data", "model"}})));
    });
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

}  // namespace

BENCHMARK(all_reduce)->Args({2, 1 << 20})->Args({2, 64 << 20})->Args({4, 64 << 20})->UseRealTime();
BENCHMARK(all_gather)->Args({2, 1 << 20})->Args({2, 64 << 20})->Args({4, 64 << 20})->UseRealTime();
BENCHMARK(memcpy_baseline)->Args({1, 1 << 20})->Args({1, 64 << 20});
BENCHMARK(reshard_rows_to_columns)->Args({8, 16 << 20})->UseRealTime();
BENCHMARK_MAIN();

// One program, two runtimes: `reshard_everywhere` runs 8 ranks as threads of one process;
// `mpirun -np 8 reshard_everywhere` runs one rank per process on MPI. Either way it shards a
// real array with each strategy, reshards it through every pair of a set of shardings
// (uneven and Partial among them), gathers it back bit-identical, and prints the bytes that
// moved.
#include <cstring>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>

#include "shardwise/array/placement_ops.hpp"
#include "shardwise/array/transfer_plan.hpp"
#include "shardwise/comm/mpi.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"

using namespace shardwise;

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("check failed: " + what);
}

std::vector<std::byte> as_bytes(const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

void run(Communicator& comm) {
  require(comm.size() == 8, "8 ranks (got " + std::to_string(comm.size()) + ")");
  const Mesh mesh = Mesh::parse("pipeline=2,data=2,model=2");
  const Shape shape{64, 30};
  std::vector<float> host(static_cast<std::size_t>(num_elements(shape)));
  std::iota(host.begin(), host.end(), 0.0F);
  const std::vector<std::byte> expected = as_bytes(host);

  // Each strategy places the array (from the copy every rank has, or scattered from rank 0).
  const std::vector<std::shared_ptr<const ShardingStrategy>> strategies{
      std::make_shared<DataParallelStrategy>(),
      std::make_shared<FSDPStrategy>("data", std::nullopt, 8),
      std::make_shared<TensorParallelStrategy>(), std::make_shared<PipelineParallelStrategy>(2)};
  for (const auto& strategy : strategies) {
    const ShardedArray placed =
        strategy->apply_sharding(comm, host.data(), shape, DType::kF32, mesh);
    require(gather(comm, placed) == expected, "gather after " + strategy->axis_name());
    const ShardedArray scattered = strategy->apply_sharding(
        comm, comm.rank() == 0 ? host.data() : nullptr, shape, DType::kF32, mesh, 0);
    require(gather(comm, scattered) == expected, "gather after scatter");
  }

  // Every pair of shardings, uneven ones included (30 columns over 4 or 8 shards).
  std::vector<NamedSharding> shardings;
  for (const P& spec : {P(), P{"data"}, P{None, "model"}, P{{"pipeline", "data"}, "model"},
                        P{"model", {"data", "pipeline"}}, P{None, {"pipeline", "data", "model"}}}) {
    shardings.emplace_back(mesh, spec, Evenness::kUneven);
  }
  std::int64_t must_move = 0;
  comm.counters().clear();
  for (const NamedSharding& from : shardings) {
    const ShardedArray source = shard_replicated(comm, host.data(), shape, DType::kF32, from);
    for (const NamedSharding& to : shardings) {
      const ShardedArray moved = reshard(comm, source, to);
      require(gather_to(comm, moved, 0).empty() != (comm.rank() == 0), "gather_to");
      must_move += bytes_moved(plan_transfers(from, to, shape), 4) +
                   bytes_moved(plan_transfers(to, NamedSharding(mesh, P()), shape, 0), 4);
    }
  }
  std::int64_t received = comm.counters().for_op(CommOp::kAllToAllv).received;
  comm.all_reduce(&received, &received, 1, DType::kI64, ReduceOp::kSum, world_group(8));
  require(received == must_move, "bytes received " + std::to_string(received) +
                                     " == bytes that had to move " + std::to_string(must_move));

  // A pending sum over 'model' becomes a sharding over it.
  const std::int64_t m = mesh.coords_of(comm.rank())[2];
  std::vector<float> part(host);
  for (float& v : part) v *= m == 0 ? 1.0F : 0.0F;  // the sum over 'model' is the array itself
  const ShardedArray partial(NamedSharding(mesh, P()), shape, DType::kF32, comm.rank(),
                             as_bytes(part), {{"model", ReduceOp::kSum}});
  const ShardedArray reduced = reshard(comm, partial, NamedSharding(mesh, P{"model"}));
  require(gather(comm, reduced) == expected, "partial sum resharded");

  std::ostringstream line;
  line << comm.backend() << " rank " << comm.rank() << ": " << comm.counters().to_json() << "\n";
  std::cout << line.str();
  if (comm.rank() == 0) {
    std::cout << "all " << shardings.size() * shardings.size() << " reshards on the "
              << comm.backend() << " backend (" << comm.size()
              << " ranks) gathered back bit-identical; " << received
              << " bytes received, exactly the bytes that had to move\n";
  }
}

}  // namespace

int main(int argc, char** argv) { return run_spmd(&argc, &argv, 8, run); }

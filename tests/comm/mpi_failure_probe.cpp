// A program that fails on purpose under mpirun, for the failure tests:
//   throw    - rank 1 throws; the job must end promptly with its message.
//   pipeline - a 1F1B schedule whose stage 2 fails mid-step; the job must end promptly with it.
//   timeout  - rank 1 never joins a barrier; rank 0 must fail after its 200 ms timeout.
//   stopped-all-reduce, stopped-all-gather - rank 1's process is stopped (SIGSTOP) inside a
//              128 MB collective: rank 0 must end the job within the 2 s timeout (a blocking
//              all-reduce through the watchdog's one line, an all-gather as a CommError).
//   mismatch-* - rank 0 makes another call than the others (broadcast vs all-reduce, count 8 vs
//              16, all-reduce vs all-gather, all-gather counts, f64 vs i64, max vs sum): every
//              rank must fail at once with an error naming both calls and ranks, not hang or
//              return mixed data. mismatch-alltoallv-more and -fewer: in an all_to_allv rank 0
//              expects more (fewer) elements from rank 1 than rank 1 sends: every rank fails
//              naming the disagreement (MPI itself passes the first unnoticed).
//   clean-*   - the end of a job as `shardwise` ends it under mpirun (end_mpi_job), without
//               MPI_Abort: clean-throw (rank 1 throws while rank 0 waits: one line, rank 1's),
//               clean-both (both throw their own errors at once: one line, rank 0's),
//               clean-hang (rank 0 throws, rank 1 is busy for 30 s: rank 0 stops waiting for
//               it after 2 s and ends the job with its own line).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "shardwise/comm/mpi.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/pipeline_executor.hpp"

namespace {

class FailingChunk final : public shardwise::train::PipelineChunk {
 public:
  FailingChunk(std::size_t boundary, bool fails) : boundary_(boundary), fails_(fails) {}
  [[nodiscard]] std::size_t boundary_elements() const override { return boundary_; }
  float forward(std::int64_t microbatch, std::span<const float>, std::span<float> out) override {
    if (fails_ && microbatch == 2) throw shardwise::InvalidArgument("stage broke");
    std::fill(out.begin(), out.end(), 1.0F);
    return 0;
  }
  void backward(std::int64_t, std::span<const float>, std::span<float> in) override {
    std::fill(in.begin(), in.end(), 1.0F);
  }

 private:
  std::size_t boundary_;
  bool fails_;
};

void clean_part(const std::string& mode, shardwise::Communicator& comm) {
  using namespace shardwise;
  const Group world = world_group(comm.size());
  BarrierOptions patient;
  patient.timeout = std::chrono::seconds(60);
  if (mode == "clean-throw") {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      throw InvalidArgument("boom");
    }
    comm.barrier(world, patient);
  } else if (mode == "clean-both") {
    throw InvalidArgument(comm.rank() == 0 ? "zero failed" : "one failed");
  } else if (mode == "clean-hang") {
    if (comm.rank() == 0) throw CommError("boom");
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode.rfind("clean-", 0) == 0) {
    shardwise::Communicator& comm = shardwise::mpi_session(&argc, &argv).world();
    shardwise::ProcessResult result;
    try {
      clean_part(mode, comm);
    } catch (const std::exception& e) {
      result = {shardwise::exit_status_of(e), "probe", e.what()};
    }
    return shardwise::end_mpi_job(
        result, mode == "clean-hang" ? std::chrono::seconds(2) : std::chrono::seconds(60));
  }
  return shardwise::run_spmd(&argc, &argv, 2, [&](shardwise::Communicator& comm) {
    const shardwise::Group world = shardwise::world_group(comm.size());
    if (mode == "throw") {
      if (comm.rank() == 1) throw shardwise::InvalidArgument("boom");
      comm.barrier(world);
    } else if (mode == "pipeline") {
      // A 1F1B schedule over every rank, stage 2 failing at micro-batch 2's forward while its
      // neighbours wait for its messages and read its earlier ones.
      FailingChunk chunk(1 << 16, comm.rank() == 2);
      std::vector<shardwise::train::PipelineChunk*> chunks{&chunk};
      (void)shardwise::train::run_pipeline_schedule(
          shardwise::build_schedule(shardwise::ScheduleKind::kOneFOneB, comm.size(), 8), chunks,
          comm);
    } else if (mode.rfind("mismatch-", 0) == 0) {
      using namespace shardwise;
      AllReduceOptions options;
      options.timeout = std::chrono::seconds(2);
      std::vector<double> buffer(64, 1.0);
      const bool odd = comm.rank() == 0;
      if (mode == "mismatch-broadcast") {
        if (odd) {
          comm.broadcast(buffer.data(), 16, DType::kF64, 0, world, {options});
        } else {
          comm.all_reduce(buffer.data(), buffer.data(), 16, DType::kF64, ReduceOp::kSum, world,
                          options);
        }
      } else if (mode == "mismatch-count") {
        comm.all_reduce(buffer.data(), buffer.data(), odd ? 8 : 16, DType::kF64, ReduceOp::kSum,
                        world, options);
      } else if (mode == "mismatch-gather") {
        if (odd) {
          comm.all_gather(buffer.data(), buffer.data() + 32, 4, DType::kF64, world, {options});
        } else {
          comm.all_reduce(buffer.data(), buffer.data(), 16, DType::kF64, ReduceOp::kSum, world,
                          options);
        }
      } else if (mode == "mismatch-gather-count") {
        std::vector<double> out(64);
        comm.all_gather(buffer.data(), out.data(), odd ? 2 : 4, DType::kF64, world, {options});
      } else if (mode == "mismatch-dtype") {
        comm.all_reduce(buffer.data(), buffer.data(), 16, odd ? DType::kF64 : DType::kI64,
                        ReduceOp::kSum, world, options);
      } else if (mode.rfind("mismatch-alltoallv-", 0) == 0) {
        // Two elements to every member; rank 0 expects one more (or one fewer) from rank 1.
        const auto n = static_cast<std::size_t>(comm.size());
        BlockLayout send, receive;
        for (std::size_t j = 0; j < n; ++j) {
          send.counts.push_back(2);
          send.offsets.push_back(2 * j);
          receive.counts.push_back(2);
          receive.offsets.push_back(4 * j);
        }
        if (odd) receive.counts[1] = mode == "mismatch-alltoallv-more" ? 3 : 1;
        std::vector<double> out(4 * n);
        AllToAllvOptions alltoallv;
        alltoallv.timeout = std::chrono::seconds(2);
        comm.all_to_allv(buffer.data(), send, out.data(), receive, DType::kF64, world, alltoallv);
      } else if (mode == "mismatch-op") {
        comm.all_reduce(buffer.data(), buffer.data(), 16, DType::kF64,
                        odd ? ReduceOp::kMax : ReduceOp::kSum, world, options);
      }
      comm.barrier(world);
    } else if (mode == "abort") {
      // Rank 0 aborts while the others wait in a barrier with a long timeout.
      shardwise::BarrierOptions options;
      options.timeout = std::chrono::seconds(60);
      if (comm.rank() == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        comm.abort("stop");
        std::this_thread::sleep_for(std::chrono::seconds(20));
        return;
      }
      comm.barrier(world, options);
    } else if (mode == "stopped-all-reduce" || mode == "stopped-all-gather") {
      // Both meet, then rank 1's process stops (SIGSTOP) while the data moves: rank 0's call
      // must end within its 2 s timeout, not wait for it forever.
      const std::size_t count = std::size_t{32} << 20;
      std::vector<float> in(count, 1.0F);
      std::vector<float> out(mode == "stopped-all-gather" ? 2 * count : count);
      comm.barrier(world);
      std::thread stopper;
      if (comm.rank() == 1) {
        stopper = std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          std::raise(SIGSTOP);
        });
      }
      if (mode == "stopped-all-reduce") {
        shardwise::AllReduceOptions options;
        options.timeout = std::chrono::seconds(2);
        comm.all_reduce(in.data(), out.data(), count, shardwise::DType::kF32,
                        shardwise::ReduceOp::kSum, world, options);
      } else {
        shardwise::AllGatherOptions options;
        options.timeout = std::chrono::seconds(2);
        comm.all_gather(in.data(), out.data(), count, shardwise::DType::kF32, world, options);
      }
      if (stopper.joinable()) stopper.join();
      // Where the data outran the stop, the probe fails on its own: nothing was shown.
      throw shardwise::InvalidArgument("the collective finished before the stop");
    } else if (mode == "timeout") {
      if (comm.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::seconds(20));
        return;
      }
      shardwise::BarrierOptions options;
      options.timeout = std::chrono::milliseconds(200);
      comm.barrier(world, options);
    }
  });
}

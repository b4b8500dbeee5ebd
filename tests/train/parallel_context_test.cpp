// The parallel context: a rank's coordinates and degrees on the training axes, one communicator
// per axis (its members are the ranks that share every other coordinate), ZeRO's axes from one
// rule, and bytes counted under each axis.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "error_of.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/train/parallel_context.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

TEST(ParallelContext, EveryAxisHasTheRanksThatShareTheOtherCoordinates) {
  const Mesh mesh({"data", "fsdp", "model"}, {2, 3, 2});
  std::mutex mutex;
  run_local(12, [&](Communicator& comm) {
    const ParallelContext context(comm, mesh);
    const Rank r = comm.rank();
    const int data = r / 6, fsdp = r / 2 % 3, model = r % 2;
    std::lock_guard lock(mutex);
    EXPECT_EQ(context.coordinate("data"), data);
    EXPECT_EQ(context.coordinate("fsdp"), fsdp);
    EXPECT_EQ(context.coordinate("model"), model);
    EXPECT_EQ(context.coordinate("pipeline"), 0);
    EXPECT_EQ(context.degree("fsdp"), 3);
    EXPECT_EQ(context.degree("pipeline"), 1);
    EXPECT_EQ(context.ranks_along("model"), (std::vector<Rank>{r - model, r - model + 1}));
    EXPECT_EQ(context.ranks_along("data"), (std::vector<Rank>{r % 6, r % 6 + 6}));
    EXPECT_EQ(context.ranks_along("fsdp"),
              (std::vector<Rank>{data * 6 + model, data * 6 + model + 2, data * 6 + model + 4}));
    EXPECT_EQ(context.ranks_along("pipeline"), (std::vector<Rank>{r}));
    EXPECT_EQ(context.communicator("fsdp").rank(), fsdp);
    EXPECT_EQ(context.group("model").axes(), "model");
    EXPECT_EQ(context.shard_axis(), "fsdp");
    EXPECT_EQ(context.replica_axis(), "data");
    EXPECT_EQ(context.data_parallel_size(), 6);
    EXPECT_EQ(context.data_parallel_index(), data * 3 + fsdp);
  });
}

TEST(ParallelContext, ZeroShardsOverFsdpWhereItSplitsAndReplicatesOverDataWhereBothDo) {
  const auto axes = [](const std::string& text) {
    const Mesh mesh = Mesh::parse(text);
    return ParallelContext::shard_axis_of(mesh) + "/" + ParallelContext::replica_axis_of(mesh);
  };
  EXPECT_EQ(axes("data=4"), "data/");
  EXPECT_EQ(axes("fsdp=4"), "fsdp/");
  EXPECT_EQ(axes("data=2,fsdp=2"), "fsdp/data");
  EXPECT_EQ(axes("data=2,fsdp=1"), "data/");  // as the planner: fsdp of one shards nothing
  EXPECT_EQ(axes("data=1,fsdp=2"), "fsdp/");
  EXPECT_EQ(axes("fsdp=1"), "fsdp/");
  EXPECT_EQ(axes("model=2"), "/");
}

TEST(ParallelContext, EachAxisCountsItsOwnBytes) {
  const Mesh mesh({"data", "model"}, {2, 2});
  std::vector<std::map<std::string, std::int64_t>> sent(4);
  run_local(4, [&](Communicator& comm) {
    const ParallelContext context(comm, mesh);
    std::vector<float> values(1000, 1.0F);
    for (const char* axis : {"data", "model"}) {
      context.communicator(axis).all_reduce(values.data(), values.data(), values.size(),
                                            DType::kF32, ReduceOp::kSum, context.group(axis));
    }
    context.communicator("model").all_reduce(values.data(), values.data(), values.size(),
                                             DType::kF32, ReduceOp::kSum, context.group("model"));
    EXPECT_EQ(values.front(), 8.0F);
    sent[static_cast<std::size_t>(comm.rank())] = context.bytes_sent_by_axes();
  });
  for (const auto& bytes : sent) {
    EXPECT_EQ(bytes.at("data"), 4000);  // an all-reduce of 2 members sends half, twice: n - 1
    EXPECT_EQ(bytes.at("model"), 8000);
  }
}

// Each axis has its own communicator, so its own queue: an all-reduce over data finishes while
// one over model started before it is still waiting for a late member.
TEST(ParallelContext, CollectivesOfDifferentAxesNeverShareAQueue) {
  const Mesh mesh({"data", "model"}, {2, 2});
  std::atomic<int> data_done{0};
  run_local(4, [&](Communicator& comm) {
    const ParallelContext context(comm, mesh);
    float model_value = 1.0F;
    float data_value = 1.0F;
    if (context.coordinate("model") == 1) {
      // The late member of every model group joins only once the other members' data
      // all-reduce (ranks 0 and 2) is done.
      while (data_done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      context.communicator("model").all_reduce(&model_value, &model_value, 1, DType::kF32,
                                               ReduceOp::kSum, context.group("model"));
      context.communicator("data").all_reduce(&data_value, &data_value, 1, DType::kF32,
                                              ReduceOp::kSum, context.group("data"));
      ++data_done;
      return;
    }
    Work model_work = context.communicator("model").iall_reduce(
        &model_value, &model_value, 1, DType::kF32, ReduceOp::kSum, context.group("model"));
    context.communicator("data").all_reduce(&data_value, &data_value, 1, DType::kF32,
                                            ReduceOp::kSum, context.group("data"));
    EXPECT_EQ(data_value, 2.0F);
    ++data_done;
    model_work.wait();
    EXPECT_EQ(model_value, 2.0F);
  });
}

TEST(ParallelContext, AMeshTheTrainingLayerCannotRunIsNamed) {
  EXPECT_THAT(error_of([] { ParallelContext::validate(Mesh::parse("data=2,tensor=2"), 4); }),
              HasSubstr("mesh: axis 'tensor' is not one the training layer knows (data, fsdp, "
                        "model, pipeline, expert)"));
  // A role the registry has but the training layer does not run yet is named for what it is.
  EXPECT_THAT(error_of([] { ParallelContext::validate(Mesh::parse("data=2,context=2"), 4); }),
              HasSubstr("mesh: axis 'context' is context parallelism (every activation split "
                        "along the sequence, attention across the ranks), which the training "
                        "layer does not run yet"));
  ParallelContext::validate(Mesh::parse("data=2,expert=2"), 4);
  EXPECT_THAT(error_of([] { ParallelContext::validate(Mesh::parse("data=2"), 3); }),
              HasSubstr("has 2 devices but the job has 3 ranks"));
  EXPECT_THAT(error_of([] {
                ParallelContext::validate(Mesh({"data"}, {2}, std::vector<DeviceId>{1, 0}), 2);
              }),
              HasSubstr("names devices"));
  run_local(1, [](Communicator& comm) {
    const ParallelContext context(comm, Mesh::parse("data=1"));
    EXPECT_THAT(error_of([&] { (void)context.degree("tensor"); }),
                HasSubstr("'tensor' is not an axis of the training layer"));
  });
}

}  // namespace
}  // namespace shardwise::train

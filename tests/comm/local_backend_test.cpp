#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

#include "conformance_checks.hpp"
#include "error_of.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class LocalConformance : public ::testing::TestWithParam<int> {};

TEST_P(LocalConformance, EveryCollectiveMatchesItsClosedForm) {
  run_local(GetParam(), [](Communicator& comm) {
    EXPECT_EQ(comm.backend(), "local");
    testing::run_all_checks(comm);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalConformance, ::testing::Range(1, 9));

TEST(LocalBackend, ByteCountersAddUp) {
  std::vector<ByteCounters> counters(4);
  run_local(4, [&](Communicator& comm) {
    std::vector<float> in(100, 1.0F);
    std::vector<float> out(400);
    comm.all_gather(in.data(), out.data(), 100, DType::kF32, world_group(4));
    comm.all_reduce(in.data(), in.data(), 100, DType::kF32, ReduceOp::kSum, world_group(4));
    counters[static_cast<std::size_t>(comm.rank())] = comm.counters();
  });
  std::int64_t sent = 0;
  std::int64_t received = 0;
  for (const ByteCounters& c : counters) {
    // all-gather: 3 peers x 400 bytes each way; all-reduce: 2 (n - 1) / n x 400 bytes.
    EXPECT_EQ(c.for_op(CommOp::kAllGather), (ByteCount{1200, 1200, 1}));
    EXPECT_EQ(c.for_op(CommOp::kAllReduce), (ByteCount{600, 600, 1}));
    EXPECT_EQ(c.for_axes("world").calls, 2);
    sent += c.total().sent;
    received += c.total().received;
  }
  EXPECT_EQ(sent, received);
  const auto json = nlohmann::json::parse(counters[0].to_json());
  EXPECT_EQ(json["total"]["sent"], 1800);
  EXPECT_EQ(json["by_op"]["all_gather"]["received"], 1200);
}

// Tags: in process any non-negative int (MPI bounds them by MPI_TAG_UB); a negative one is
// refused before anything is sent, naming it.
TEST(LocalBackend, TagsUpToTheBackendsBound) {
  run_local(2, [](Communicator& comm) {
    EXPECT_EQ(comm.max_tag(), std::numeric_limits<int>::max());
    const float value = 1;
    SendRecvOptions options;
    options.tag = -1;
    EXPECT_THAT(
        error_of([&] { (void)comm.isend(&value, 1, DType::kF32, 1 - comm.rank(), options); }),
        HasSubstr("tag -1 is outside 0 to 2147483647"));
  });
}

TEST(LocalBackend, AMemberThatNeverArrivesTimesOutNamingIt) {
  // Ranks 2 and 3 stay away (alive) until ranks 0 and 1 have timed out.
  std::atomic<int> timed_out{0};
  std::vector<std::string> messages(2);
  run_local(4, [&](Communicator& comm) {
    if (comm.rank() >= 2) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (timed_out.load() < 2 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return;
    }
    AllReduceOptions options;
    options.timeout = std::chrono::milliseconds(100);
    float x = 1;
    messages[static_cast<std::size_t>(comm.rank())] = error_of(
        [&] { comm.all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, world_group(4), options); });
    ++timed_out;
  });
  for (const std::string& message : messages) {
    EXPECT_THAT(message, HasSubstr("all_reduce over [0, 1, 2, 3] along 'world': ranks 2, 3 did "
                                   "not arrive within 100 ms"));
  }
}

TEST(LocalBackend, AMemberThatFinishedFailsTheOthersAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([] {
    run_local(3, [](Communicator& comm) {
      if (comm.rank() == 1) return;
      comm.barrier(world_group(3));  // default timeout: minutes
    });
  });
  EXPECT_THAT(message, HasSubstr("barrier over [0, 1, 2] along 'world' cannot complete: rank 1 "
                                 "finished without joining it"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(LocalBackend, ARankThatThrowsFailsTheOthersPromptly) {
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> aborted{0};
  const std::string message = error_of([&] {
    run_local(4, [&](Communicator& comm) {
      if (comm.rank() == 2) throw InvalidArgument("boom");
      try {
        std::vector<float> in(8);
        std::vector<float> out(32);
        comm.all_gather(in.data(), out.data(), 8, DType::kF32, world_group(4));
      } catch (const CommError& e) {
        EXPECT_THAT(e.what(), HasSubstr("all_gather over [0, 1, 2, 3] along 'world' aborted: "
                                        "rank 2 failed: boom"));
        ++aborted;
        throw;
      }
    });
  });
  EXPECT_THAT(message, StartsWith("rank 2 failed: boom"));
  EXPECT_EQ(aborted.load(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(LocalBackend, MismatchedCallsAreErrors) {
  const std::string message = error_of([] {
    run_local(2, [](Communicator& comm) {
      std::vector<float> buffer(4);
      if (comm.rank() == 0) {
        comm.all_reduce(buffer.data(), buffer.data(), 4, DType::kF32, ReduceOp::kSum,
                        world_group(2));
      } else {
        comm.broadcast(buffer.data(), 4, DType::kF32, 0, world_group(2));
      }
    });
  });
  EXPECT_THAT(message, HasSubstr("called"));
  EXPECT_THAT(message, HasSubstr(" where rank "));
}

TEST(LocalBackend, BadArguments) {
  EXPECT_THAT(error_of([] { run_local(0, [](Communicator&) {}); }),
              HasSubstr("run_local needs 1 to 4096 ranks, got 0"));
  EXPECT_THAT(error_of([] {
                run_local(2, [](Communicator& comm) {
                  float x = 0;
                  comm.all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, Group{{0, 5}, "x"});
                });
              }),
              HasSubstr("group [0, 5] along 'x' names rank 5 outside 0..1"));
  EXPECT_THAT(error_of([] {
                run_local(2, [](Communicator& comm) {
                  float x = 0;
                  comm.all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, Group{{1}, "x"});
                });
              }),
              HasSubstr("rank 0 is not in group [1] along 'x'"));
  EXPECT_THAT(error_of([] {
                run_local(2, [](Communicator& comm) {
                  float x = 0;
                  comm.send(&x, 1, DType::kF32, comm.rank());
                });
              }),
              // Both ranks send to themselves; whichever fails first is reported.
              HasSubstr("is not another rank of 0..1"));
  EXPECT_THAT(error_of([] {
                run_local(2, [](Communicator& comm) {
                  float x[2] = {0, 0};
                  if (comm.rank() == 0) comm.send(x, 2, DType::kF32, 1);
                  if (comm.rank() == 1) comm.recv(x, 1, DType::kF32, 0);
                });
              }),
              HasSubstr("expected 4 bytes but rank 0 sent 8"));
}

TEST(LocalBackend, AllToAllInPlaceOnSomeMembersOnlyIsAMismatch) {
  const std::string message = error_of([] {
    run_local(2, [](Communicator& comm) {
      std::vector<float> in(2, 1.0F);
      std::vector<float> out(2);
      comm.all_to_all(in.data(), comm.rank() == 0 ? in.data() : out.data(), 1, DType::kF32,
                      world_group(2));
    });
  });
  // Whichever member arrives second reports the other's call.
  EXPECT_THAT(message, HasSubstr("all_to_all in place of 1 f32"));
  EXPECT_THAT(message, HasSubstr("all_to_all of 1 f32"));
  EXPECT_THAT(message, HasSubstr(" where rank "));
}

TEST(LocalBackend, AllToAllvChecksItsLayouts) {
  EXPECT_THAT(
      error_of([] {
        run_local(2, [](Communicator& comm) {
          float in[2] = {1, 2};
          float out[2] = {0, 0};
          comm.all_to_allv(in, {{1, 1}, {0}}, out, {{1, 1}, {0, 1}}, DType::kF32, world_group(2));
        });
      }),
      HasSubstr("all_to_allv: send.offsets has 1 entries for a group of 2"));
  // Rank 1 expects 2 elements from rank 0, which sends it 1.
  EXPECT_THAT(error_of([] {
                run_local(2, [](Communicator& comm) {
                  float in[3] = {1, 2, 3};
                  float out[3] = {0, 0, 0};
                  const BlockLayout receive =
                      comm.rank() == 1 ? BlockLayout{{2, 1}, {0, 2}} : BlockLayout{{1, 1}, {0, 1}};
                  comm.all_to_allv(in, {{1, 1}, {0, 1}}, out, receive, DType::kF32, world_group(2));
                });
              }),
              HasSubstr("rank 1 expects 2 elements from rank 0, which sends 1"));
}

TEST(LocalBackend, AllToAllvCountsWhatCrossesRanksUnderItsLabels) {
  std::vector<ByteCounters> counters(2);
  run_local(2, [&](Communicator& comm) {
    // Rank r keeps 1 element and sends 2 + r to the other.
    const auto r = static_cast<std::size_t>(comm.rank());
    std::vector<float> in(4, 1.0F);
    std::vector<float> out(4);
    BlockLayout send{{r == 0 ? 1U : 3U, r == 0 ? 2U : 1U}, {0, r == 0 ? 1U : 3U}};
    BlockLayout receive{{r == 0 ? 1U : 2U, r == 0 ? 3U : 1U}, {0, r == 0 ? 1U : 2U}};
    comm.all_to_allv(in.data(), send, out.data(), receive, DType::kF32, world_group(2));
    AllToAllvOptions labelled;
    labelled.member_axes = {"", ""};
    labelled.member_axes[1 - r] = "model";
    comm.all_to_allv(in.data(), send, out.data(), receive, DType::kF32, world_group(2), labelled);
    counters[r] = comm.counters();
  });
  EXPECT_EQ(counters[0].for_op(CommOp::kAllToAllv), (ByteCount{16, 24, 2}));
  EXPECT_EQ(counters[1].for_op(CommOp::kAllToAllv), (ByteCount{24, 16, 2}));
  EXPECT_EQ(counters[0].for_axes("model"), (ByteCount{8, 12, 1}));
  EXPECT_EQ(counters[0].for_axes("world"), (ByteCount{8, 12, 1}));
}

TEST(LocalBackend, PpermuteRejectsPairsThatAreNotAPermutation) {
  auto ppermute_with = [](std::vector<PermutePair> pairs, bool same_buffer = false) {
    return error_of([&] {
      run_local(3, [&](Communicator& comm) {
        float in = 1;
        float out = 0;
        comm.ppermute(&in, same_buffer ? &in : &out, 1, DType::kF32, pairs, world_group(3));
      });
    });
  };
  EXPECT_THAT(ppermute_with({{0, 1}, {2, 1}}),
              HasSubstr("ppermute: member 1 is the destination of two pairs"));
  EXPECT_THAT(ppermute_with({{0, 1}, {0, 2}}),
              HasSubstr("ppermute: member 0 is the source of two pairs"));
  EXPECT_THAT(ppermute_with({{0, 3}}),
              HasSubstr("ppermute: destination 3 is not a member index of a group of 3"));
  EXPECT_THAT(ppermute_with({{-1, 0}}),
              HasSubstr("ppermute: source -1 is not a member index of a group of 3"));
  EXPECT_THAT(ppermute_with({{0, 1}}, true),
              HasSubstr("ppermute: in and out must be different buffers"));
}

TEST(LocalBackend, PpermuteCountsOnlyTheBytesThatCrossRanks) {
  std::vector<ByteCounters> counters(3);
  run_local(3, [&](Communicator& comm) {
    std::vector<float> in(10, 1.0F);
    std::vector<float> out(10);
    // 0 -> 1 crosses ranks, 2 -> 2 stays put, 1 sends nothing and 0 receives nothing.
    comm.ppermute(in.data(), out.data(), 10, DType::kF32, {{0, 1}, {2, 2}}, world_group(3));
    counters[static_cast<std::size_t>(comm.rank())] = comm.counters();
  });
  EXPECT_EQ(counters[0].for_op(CommOp::kPpermute), (ByteCount{40, 0, 1}));
  EXPECT_EQ(counters[1].for_op(CommOp::kPpermute), (ByteCount{0, 40, 1}));
  EXPECT_EQ(counters[2].for_op(CommOp::kPpermute), (ByteCount{0, 0, 0}));
}

}  // namespace
}  // namespace shardwise

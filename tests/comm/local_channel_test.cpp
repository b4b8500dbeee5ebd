// The local backend's group channels: small collectives that run eagerly (inputs staged in the
// channel, no closing barrier) and larger ones that read peers' buffers, mixed in any order;
// calls that disagree on which of the two they are; a group that broke; members that give up
// on an eager round. Run under TSan, these check that no member overwrites what a peer still
// reads.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "error_of.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

using namespace std::chrono_literals;
using ::testing::AnyOf;
using testing::error_of;
using ::testing::HasSubstr;

// Sizes on both sides of the eager limit (16 KiB of input per member).
constexpr std::size_t kSizes[] = {1, 300, 4096, 4097, 20000};

// Every round uses other sizes and operations, with random pauses, so that members run ahead
// of each other by a round in every combination of eager and direct rounds.
TEST(LocalChannel, EagerAndDirectRoundsInterleaveWithoutReadingOverwrittenInputs) {
  for (int ranks : {2, 3}) {
    run_local(ranks, [&](Communicator& comm) {
      const Group world = world_group(ranks);
      const auto n = static_cast<std::size_t>(ranks);
      std::mt19937 pauses(static_cast<unsigned>(comm.rank()) * 7919U + 1U);
      for (int round = 0; round < 300; ++round) {
        const std::size_t count = kSizes[static_cast<std::size_t>(round) % std::size(kSizes)];
        const auto base = static_cast<float>(round * 10 + comm.rank());
        if (pauses() % 4 == 0) std::this_thread::yield();
        switch (round % 4) {
          case 0: {
            std::vector<float> data(count, base);
            comm.all_reduce(data.data(), data.data(), count, DType::kF32, ReduceOp::kSum, world);
            // Sum over ranks of round * 10 + rank.
            const float expected = static_cast<float>(round * 10 * ranks + ranks * (ranks - 1) / 2);
            ASSERT_EQ(data.front(), expected) << "round " << round;
            ASSERT_EQ(data.back(), expected) << "round " << round;
            break;
          }
          case 1: {
            std::vector<float> in(count, base);
            std::vector<float> out(count * n);
            comm.all_gather(in.data(), out.data(), count, DType::kF32, world);
            for (std::size_t j = 0; j < n; ++j) {
              ASSERT_EQ(out[j * count], static_cast<float>(round * 10 + static_cast<int>(j)))
                  << "round " << round;
              ASSERT_EQ(out[j * count + count - 1], out[j * count]) << "round " << round;
            }
            break;
          }
          case 2: {
            std::vector<float> data(count * n);
            for (std::size_t j = 0; j < n; ++j) {
              std::fill_n(data.begin() + static_cast<std::ptrdiff_t>(j * count), count,
                          base + static_cast<float>(j) * 1000);
            }
            comm.all_to_all(data.data(), data.data(), count, DType::kF32, world);
            for (std::size_t j = 0; j < n; ++j) {
              ASSERT_EQ(data[j * count], static_cast<float>(round * 10 + static_cast<int>(j)) +
                                             static_cast<float>(comm.rank()) * 1000)
                  << "round " << round;
            }
            break;
          }
          default: {
            std::vector<float> data(count, comm.rank() == 0 ? base : -1.0F);
            comm.broadcast(data.data(), count, DType::kF32, 0, world);
            ASSERT_EQ(data.back(), static_cast<float>(round * 10)) << "round " << round;
          }
        }
      }
    });
  }
}

// One member's call is small enough to run eagerly and the other's is not: the calls still
// meet, and the mismatch is reported at once rather than at the timeout.
TEST(LocalChannel, AnEagerAndADirectCallThatDisagreeFailAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      const std::size_t count = comm.rank() == 0 ? 8 : std::size_t{1} << 20;
      std::vector<float> data(count, 1.0F);
      AllReduceOptions options;
      options.timeout = 60s;
      comm.all_reduce(data.data(), data.data(), count, DType::kF32, ReduceOp::kSum, world_group(2),
                      options);
    });
  });
  EXPECT_THAT(message, HasSubstr("all_reduce of 8 f32 (sum)"));
  EXPECT_THAT(message, HasSubstr("all_reduce of 1048576 f32 (sum)"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

// After a mismatch the group is broken, as a NCCL communicator is after an error: every later
// collective on it fails at once with the first failure. Groups of other ranks go on.
TEST(LocalChannel, ABrokenGroupFailsLaterCallsAtOnceAndOtherGroupsGoOn) {
  std::atomic<int> later_failures{0};
  run_local(3, [&](Communicator& comm) {
    if (comm.rank() < 2) {
      const Group pair{{0, 1}, "pair"};
      std::vector<float> data(4, 1.0F);
      const std::string first = error_of([&] {
        if (comm.rank() == 0) {
          comm.all_reduce(data.data(), data.data(), 4, DType::kF32, ReduceOp::kSum, pair);
        } else {
          comm.broadcast(data.data(), 4, DType::kF32, 0, pair);
        }
      });
      EXPECT_THAT(first, HasSubstr(" where rank "));
      AllReduceOptions options;
      options.timeout = 60s;
      const auto start = std::chrono::steady_clock::now();
      const std::string later = error_of([&] {
        comm.all_reduce(data.data(), data.data(), 4, DType::kF32, ReduceOp::kSum, pair, options);
      });
      EXPECT_THAT(later, HasSubstr(" where rank "));
      EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
      if (later != "<no error>") ++later_failures;
    }
    // Every rank, including the two whose pair broke, still meets the others.
    std::vector<float> data(4, static_cast<float>(comm.rank()));
    comm.all_reduce(data.data(), data.data(), 4, DType::kF32, ReduceOp::kSum, world_group(3));
    EXPECT_EQ(data[0], 3.0F);
  });
  EXPECT_EQ(later_failures.load(), 2);
}

// Two members of three reach an eager all-reduce and give up before the third arrives: the
// third fails too, instead of completing with inputs its peers no longer stand behind.
TEST(LocalChannel, MembersThatGiveUpOnAnEagerRoundFailTheLateMember) {
  std::atomic<int> gave_up{0};
  std::string late_error;
  const std::string message = error_of([&] {
    run_local(3, [&](Communicator& comm) {
      std::vector<float> data(16, 1.0F);
      AllReduceOptions options;
      if (comm.rank() < 2) {
        options.timeout = 20ms;
        try {
          comm.all_reduce(data.data(), data.data(), 16, DType::kF32, ReduceOp::kSum, world_group(3),
                          options);
        } catch (const CommError&) {
          ++gave_up;
          throw;
        }
        return;
      }
      while (gave_up.load() < 1) std::this_thread::sleep_for(1ms);
      try {
        comm.all_reduce(data.data(), data.data(), 16, DType::kF32, ReduceOp::kSum, world_group(3),
                        options);
      } catch (const CommError& e) {
        late_error = e.what();
        throw;
      }
    });
  });
  EXPECT_THAT(message,
              AnyOf(HasSubstr("did not arrive within 20 ms"), HasSubstr("stopped waiting for it")));
  EXPECT_THAT(late_error, AnyOf(HasSubstr("stopped waiting for it"), HasSubstr("aborted: rank")));
}

// A member that reads every peer's flag before the last member's compare-and-swap must not run
// its part when that compare-and-swap breaks the round instead (the calls differ): no member
// returns success, none reads a buffer its peer has freed. Repeated, so that the race window
// is hit under ASan and TSan.
TEST(LocalChannel, NoMemberSucceedsOrReadsFreedBuffersWhenTheCallsDiffer) {
  std::atomic<int> succeeded{0};
  for (int attempt = 0; attempt < 200; ++attempt) {
    const std::string message = error_of([&] {
      run_local(2, [&](Communicator& comm) {
        const std::size_t count = comm.rank() == 0 ? 8 : std::size_t{1} << 16;
        std::vector<float> data(count, 1.0F);
        comm.all_reduce(data.data(), data.data(), count, DType::kF32, ReduceOp::kSum,
                        world_group(2));
        ++succeeded;
      });
    });
    ASSERT_THAT(message, HasSubstr(" where rank ")) << "attempt " << attempt;
  }
  EXPECT_EQ(succeeded.load(), 0);
}

// Operations queued on a member while its peer stalls: the first gives up and breaks the
// group, the later ones fail at once without writing their slots (a peer may still read what
// they held), and the late peer fails too.
TEST(LocalChannel, QueuedOperationsAfterABreakFailAtOnce) {
  std::atomic<int> failed_at_once{0};
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      std::vector<std::vector<float>> buffers(3, std::vector<float>(16, 1.0F));
      AllReduceOptions options;
      options.timeout = 20ms;
      if (comm.rank() == 1) {
        std::this_thread::sleep_for(100ms);
        comm.all_reduce(buffers[0].data(), buffers[0].data(), 16, DType::kF32, ReduceOp::kSum,
                        world_group(2), options);
        return;
      }
      std::vector<Work> queued;
      for (auto& buffer : buffers) {
        queued.push_back(comm.iall_reduce(buffer.data(), buffer.data(), 16, DType::kF32,
                                          ReduceOp::kSum, world_group(2), options));
      }
      EXPECT_THAT(error_of([&] { queued[0].wait(); }), HasSubstr("did not arrive within 20 ms"));
      for (std::size_t i = 1; i < queued.size(); ++i) {
        const std::string later = error_of([&] { queued[i].wait(); });
        if (later.find("stopped waiting for it") != std::string::npos) ++failed_at_once;
      }
      throw CommError("rank 0 saw its operations fail");
    });
  });
  EXPECT_EQ(failed_at_once.load(), 2);
  EXPECT_THAT(message, AnyOf(HasSubstr("rank 0 saw its operations fail"),
                             HasSubstr("stopped waiting for it")));
}

// A member whose own part of a phase throws: every other member learns that its share of the
// result is missing, instead of returning what it did not write.
TEST(LocalChannel, AMemberWhosePartThrowsFailsEveryMember) {
  std::atomic<int> told{0};
  const std::string message = error_of([&] {
    run_local(3, [&](Communicator& comm) {
      float mine = static_cast<float>(comm.rank());
      try {
        (void)comm.with_peer_buffers(&mine, world_group(3), [&](const std::vector<const void*>&) {
          if (comm.rank() == 1) throw std::runtime_error("copy failed");
        });
      } catch (const CommError& e) {
        if (std::string(e.what()).find("rank 1's part failed") != std::string::npos) ++told;
        throw;
      }
    });
  });
  EXPECT_EQ(told.load(), 2);
  EXPECT_THAT(message, AnyOf(HasSubstr("copy failed"), HasSubstr("rank 1's part failed")));
}

}  // namespace
}  // namespace shardwise

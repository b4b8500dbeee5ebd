// The hard failure cases of the local backend: members that disagree on the call, a failure
// while peers still read large buffers, timeouts shorter than the work, a member that gives up
// before a late one arrives. Run under ASan and TSan, these prove that no member frees memory
// a peer still reads and that no case hangs or corrupts silently.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <sys/resource.h>

#include "error_of.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

using namespace std::chrono_literals;
using ::testing::AnyOf;
using testing::error_of;
using ::testing::HasSubstr;

Group members(std::vector<Rank> ranks) { return Group{std::move(ranks), "g"}; }

TEST(LocalFailure, ReduceOpsThatDifferAreAMismatchNotAMixture) {
  std::atomic<int> failed{0};
  std::atomic<int> returned{0};
  const std::string message = error_of([&] {
    run_local(3, [&](Communicator& comm) {
      std::vector<float> in(64, static_cast<float>(comm.rank() + 1));
      std::vector<float> out(64);
      const ReduceOp op = comm.rank() == 2 ? ReduceOp::kMax : ReduceOp::kSum;
      try {
        comm.all_reduce(in.data(), out.data(), 64, DType::kF32, op, world_group(3));
        ++returned;
      } catch (const CommError&) {
        ++failed;
        throw;
      }
    });
  });
  EXPECT_THAT(message, AnyOf(HasSubstr("(max) where rank"), HasSubstr("(sum) where rank 2")));
  EXPECT_EQ(returned.load(), 0);
  EXPECT_EQ(failed.load(), 3);
}

TEST(LocalFailure, ReduceScatterOpsThatDifferAreAMismatch) {
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      std::vector<float> in(8, 1.0F);
      std::vector<float> out(4);
      comm.reduce_scatter(in.data(), out.data(), 4, DType::kF32,
                          comm.rank() == 0 ? ReduceOp::kMin : ReduceOp::kSum, world_group(2));
    });
  });
  EXPECT_THAT(message, HasSubstr("reduce_scatter of 4 f32 ("));
  EXPECT_THAT(message, HasSubstr(" where rank "));
}

TEST(LocalFailure, PpermutePairsThatDifferAreAMismatch) {
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      std::vector<float> in(4, 1.0F);
      std::vector<float> out(4);
      const std::vector<PermutePair> ring{{0, 1}, {1, 0}};
      const std::vector<PermutePair> one{{0, 1}};
      comm.ppermute(in.data(), out.data(), 4, DType::kF32, comm.rank() == 0 ? ring : one,
                    world_group(2));
    });
  });
  // Either member may be the one that notices.
  EXPECT_THAT(message, AnyOf(HasSubstr("pairs (0, 1) where rank 0 called ppermute of 4 f32 pairs "
                                       "(0, 1), (1, 0)"),
                             HasSubstr("pairs (0, 1), (1, 0) where rank 1 called ppermute of 4 "
                                       "f32 pairs (0, 1)")));
  // The same pairs in another order agree.
  run_local(2, [&](Communicator& comm) {
    std::vector<float> in(4, static_cast<float>(comm.rank()));
    std::vector<float> out(4);
    const std::vector<PermutePair> a{{0, 1}, {1, 0}};
    const std::vector<PermutePair> b{{1, 0}, {0, 1}};
    comm.ppermute(in.data(), out.data(), 4, DType::kF32, comm.rank() == 0 ? a : b, world_group(2));
    EXPECT_EQ(out[0], static_cast<float>(1 - comm.rank()));
  });
}

// Ranks 0 and 1 all-reduce 4M floats while rank 2, outside their group, fails: the group
// finishes reading each other's buffers before either returns, then reports the failure.
TEST(LocalFailure, AFailureOutsideTheGroupFreesNothingPeersStillRead) {
  for (int round = 0; round < 3; ++round) {
    const std::string message = error_of([&] {
      run_local(3, [&](Communicator& comm) {
        if (comm.rank() == 2) throw std::runtime_error("boom");
        std::vector<float> in(std::size_t{4} << 20, 1.0F);
        std::vector<float> out(in.size());
        comm.all_reduce(in.data(), out.data(), in.size(), DType::kF32, ReduceOp::kSum,
                        members({0, 1}));
        EXPECT_EQ(out.back(), 2.0F);
      });
    });
    EXPECT_THAT(message, HasSubstr("rank 2 failed: boom"));
  }
}

// A timeout far shorter than the work: nobody leaves while a peer still reads its buffers;
// the timeout is reported once all have finished.
TEST(LocalFailure, ATimeoutShorterThanTheWorkFreesNothingPeersStillRead) {
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> complete{0};
    const std::string message = error_of([&] {
      run_local(2, [&](Communicator& comm) {
        std::vector<float> in(std::size_t{4} << 20, 1.0F);  // 16 MB
        std::vector<float> out(in.size());
        AllReduceOptions options;
        options.timeout = 1ms;
        try {
          comm.all_reduce(in.data(), out.data(), in.size(), DType::kF32, ReduceOp::kSum,
                          world_group(2), options);
        } catch (const CommError&) {
          // Reported after the data moved: every byte is there.
          if (out.front() == 2.0F && out.back() == 2.0F) ++complete;
          throw;
        }
        ++complete;
      });
    });
    // Whether the 1 ms passed depends on the machine; if it did, it was said, after the work.
    if (!message.empty()) {
      EXPECT_THAT(message, AnyOf(HasSubstr("did not finish within 1 ms"),
                                 HasSubstr("did not arrive within 1 ms")));
    }
    if (message.find("did not finish") != std::string::npos) {
      EXPECT_GE(complete.load(), 1);
    }
  }
}

// Rank 0 gives up waiting before rank 1 arrives: rank 1 must fail, not read rank 0's freed
// buffers.
TEST(LocalFailure, AMemberThatGaveUpIsWithdrawnBeforeALateMemberArrives) {
  std::atomic<bool> gave_up{false};
  std::string late_error;
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      AllReduceOptions options;
      if (comm.rank() == 0) {
        std::vector<float> in(std::size_t{1} << 20, 1.0F);
        std::vector<float> out(in.size());
        options.timeout = 20ms;
        try {
          comm.all_reduce(in.data(), out.data(), in.size(), DType::kF32, ReduceOp::kSum,
                          world_group(2), options);
        } catch (const CommError&) {
          gave_up = true;
          in.clear();  // freed while rank 1 has not yet arrived
          in.shrink_to_fit();
          throw;
        }
        return;
      }
      while (!gave_up) std::this_thread::sleep_for(1ms);
      std::vector<float> in(std::size_t{1} << 20, 1.0F);
      std::vector<float> out(in.size());
      try {
        comm.all_reduce(in.data(), out.data(), in.size(), DType::kF32, ReduceOp::kSum,
                        world_group(2), options);
      } catch (const CommError& e) {
        late_error = e.what();
        throw;
      }
    });
  });
  // Either rank's failure may be reported first; both carry rank 0's timeout.
  EXPECT_THAT(message, HasSubstr("did not arrive within 20 ms"));
  EXPECT_THAT(late_error, AnyOf(HasSubstr("rank 0 stopped waiting for it"),
                                HasSubstr("aborted: rank 0 failed")));
}

// A mismatch detected by the last member to arrive fails every member at once, not at the
// timeout.
TEST(LocalFailure, MembersAlreadyWaitingFailAtOnceOnAMismatch) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] {
    run_local(4, [&](Communicator& comm) {
      std::vector<double> buffer(16);
      AllReduceOptions options;
      options.timeout = 60s;
      if (comm.rank() == 3) std::this_thread::sleep_for(20ms);
      comm.all_reduce(buffer.data(), buffer.data(), comm.rank() == 3 ? 8 : 16, DType::kF64,
                      ReduceOp::kSum, world_group(4), options);
    });
  });
  EXPECT_THAT(message, HasSubstr("all_reduce of 8 f64 (sum) where rank"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(LocalFailure, ANonPositiveTimeoutIsBadInput) {
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      float x = 0;
      AllReduceOptions options;
      options.timeout = -5ms;
      comm.all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, world_group(2), options);
    });
  });
  EXPECT_THAT(message, HasSubstr("all_reduce: timeout is -5 ms; expected a positive duration"));
  // One past a year is refused too: every backend adds a timeout to the clock's now.
  EXPECT_THAT(error_of([&] {
                run_local(2, [&](Communicator& comm) {
                  float x = 0;
                  AllReduceOptions options;
                  options.timeout = std::chrono::milliseconds::max();
                  comm.all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, world_group(2), options);
                });
              }),
              HasSubstr("expected a positive duration of at most 31536000000 ms (a year)"));
  EXPECT_THAT(error_of([&] {
                run_local(2, [&](Communicator& comm) {
                  float x = 0;
                  SendRecvOptions options;
                  options.timeout = 0ms;
                  if (comm.rank() == 0) comm.recv(&x, 1, DType::kF32, 1, options);
                });
              }),
              HasSubstr("recv: timeout is 0 ms"));
}

// abort() releases every member waiting anywhere in the world, at once.
TEST(LocalFailure, AbortReleasesEveryWaitingMember) {
  std::atomic<int> released{0};
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] {
    run_local(4, [&](Communicator& comm) {
      if (comm.rank() == 0) {
        std::this_thread::sleep_for(20ms);
        comm.abort("stop");
        return;
      }
      BarrierOptions options;
      options.timeout = 60s;
      try {
        comm.barrier(world_group(4), options);
      } catch (const CommError& e) {
        if (std::string(e.what()).find("rank 0 aborted: stop") != std::string::npos) ++released;
        throw;
      }
    });
  });
  EXPECT_EQ(released.load(), 3);
  EXPECT_THAT(message, HasSubstr("rank 0 aborted: stop"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

// Sanitizers reserve far more address space than a limit on it allows.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// When the system cannot start every thread, the ones that started are failed and joined
// (no std::terminate) and the error names the rank that could not start. A child process
// with a small address-space limit makes thread creation fail.
TEST(LocalFailure, ThreadsThatCannotStartAreAnErrorNotATerminate) {
  if (kSanitized) GTEST_SKIP() << "address-space limits do not mix with sanitizers";
  EXPECT_EXIT(
      {
        rlimit limit{};
        getrlimit(RLIMIT_AS, &limit);
        limit.rlim_cur = rlim_t{512} << 20;
        setrlimit(RLIMIT_AS, &limit);
        try {
          run_local(4000, [](Communicator& comm) { comm.barrier(world_group(comm.size())); });
        } catch (const CommError& e) {
          const std::string text = e.what();
          std::_Exit(text.find("the system would not start another thread") != std::string::npos &&
                             text.find("ulimit -v is 524288 KiB") != std::string::npos
                         ? 0
                         : 3);
        }
        std::_Exit(4);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace shardwise

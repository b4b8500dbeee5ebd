// How the kernels split a loop among threads (src/kernels/parallel.hpp): parallel_for cuts it
// into several contiguous ranges per thread, which the threads take as each finishes its last,
// so that a thread slowed down (a busy core of a shared machine) does not hold the others up;
// parallel_split gives each thread one range. Built with OpenMP where the kernels are.
#include "kernels/parallel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "shardwise/kernels/matmul.hpp"

namespace shardwise::kernels::detail {
namespace {

// Sets the calling thread's kernel threads for a scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : before_(blas_threads()) { set_blas_threads(threads); }
  ~ScopedThreads() { set_blas_threads(before_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int before_;
};

struct Range {
  std::size_t first, last;
  std::thread::id thread;
  std::size_t started;  // 0 for the first range the loop started, 1 for the next, ...
};

// Runs `loop` (parallel_for or parallel_split) on `threads` threads and returns the ranges its
// body saw, in order of their first item. `slow_first` holds up the range that starts at 0.
template <class Loop>
std::vector<Range> ranges_of(Loop loop, int threads, std::size_t count, std::size_t grain,
                             std::chrono::milliseconds slow_first = {}) {
  const ScopedThreads scoped(threads);
  std::mutex lock;
  std::vector<Range> seen;
  std::size_t started = 0;
  loop(count, grain, [&](std::size_t first, std::size_t last) {
    {
      const std::lock_guard<std::mutex> guard(lock);
      seen.push_back({first, last, std::this_thread::get_id(), started++});
    }
    if (first == 0) std::this_thread::sleep_for(slow_first);
  });
  std::sort(seen.begin(), seen.end(),
            [](const Range& a, const Range& b) { return a.first < b.first; });
  return seen;
}

const auto kFor = [](std::size_t count, std::size_t grain, auto&& body) {
  parallel_for(count, grain, body);
};
const auto kSplit = [](std::size_t count, std::size_t grain, auto&& body) {
  parallel_split(count, grain, body);
};

// The ranges cover [0, count) once each, in contiguous pieces.
void expect_cover(const std::vector<Range>& ranges, std::size_t count) {
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front().first, 0U);
  EXPECT_EQ(ranges.back().last, count);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_LT(ranges[i].first, ranges[i].last) << "range " << i << " is empty";
    if (i > 0) {
      EXPECT_EQ(ranges[i].first, ranges[i - 1].last) << "a gap or an overlap at " << i;
    }
  }
}

bool runs_on_threads() { return loop_threads(1000, 1) == blas_threads() && blas_threads() > 1; }

TEST(ParallelLoops, ForCutsTheLoopIntoRangesOfAtLeastTheGrain) {
  for (const int threads : {1, 2, 4}) {
    for (const std::size_t count : {1U, 7U, 100U, 1000U, 4097U}) {
      for (const std::size_t grain : {1U, 10U, 64U}) {
        const std::vector<Range> ranges = ranges_of(kFor, threads, count, grain);
        SCOPED_TRACE(testing::Message()
                     << threads << " threads, " << count << " items, grain " << grain);
        expect_cover(ranges, count);
        EXPECT_LE(ranges.size(), static_cast<std::size_t>(threads) * kRangesPerThread);
        if (ranges.size() > 1) {
          for (const Range& r : ranges) EXPECT_GE(r.last - r.first, grain);
        }
      }
    }
  }
}

TEST(ParallelLoops, SplitGivesEachThreadOneRangeOfEqualSize) {
  for (const int threads : {1, 2, 3}) {
    for (const std::size_t count : {5U, 100U, 1001U}) {
      const std::vector<Range> ranges = ranges_of(kSplit, threads, count, 1);
      SCOPED_TRACE(testing::Message() << threads << " threads, " << count << " items");
      expect_cover(ranges, count);
      const ScopedThreads scoped(threads);
      if (!runs_on_threads()) continue;
      EXPECT_EQ(ranges.size(), static_cast<std::size_t>(threads));
      for (const Range& r : ranges) EXPECT_LE(r.last - r.first, count / ranges.size() + 1);
    }
  }
}

// While one thread is held up in the range at 0, the other takes every range left: the held-up
// thread starts none after it. (Which thread that is depends on which starts first: the first
// block's own thread, or the other after running its own block.)
TEST(ParallelLoops, ForGivesTheRangesLeftToTheThreadThatIsFree) {
  const ScopedThreads scoped(2);
  if (!runs_on_threads()) GTEST_SKIP() << "the kernels run on one thread in this build";
  const std::vector<Range> ranges = ranges_of(kFor, 2, 1600, 1, std::chrono::milliseconds(300));
  expect_cover(ranges, 1600);
  ASSERT_EQ(ranges.size(), 2 * kRangesPerThread);
  std::map<std::thread::id, std::size_t> per_thread;
  for (const Range& r : ranges) ++per_thread[r.thread];
  ASSERT_EQ(per_thread.size(), 2U) << "both threads took ranges";
  const Range& held = ranges.front();
  for (const Range& r : ranges) {
    if (r.thread == held.thread) {
      EXPECT_LE(r.started, held.started) << "the held-up thread started [" << r.first << ", "
                                         << r.last << ") after the range at 0";
    }
  }
}

TEST(ParallelLoops, TheFirstFailureIsRethrownAndStopsNewRanges) {
  for (const int threads : {1, 2}) {
    const ScopedThreads scoped(threads);
    std::mutex lock;
    std::size_t started = 0;
    const auto fail_at_start = [&](std::size_t first, std::size_t) {
      {
        const std::lock_guard<std::mutex> guard(lock);
        ++started;
      }
      if (first == 0) throw std::runtime_error("range at 0 failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    EXPECT_THROW(
        {
          try {
            parallel_for(1600, 1, fail_at_start);
          } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "range at 0 failed");
            throw;
          }
        },
        std::runtime_error);
    // The thread that failed at once starts nothing more; the other finishes what it holds.
    EXPECT_LE(started, static_cast<std::size_t>(threads)) << threads << " threads";
    EXPECT_THROW(parallel_split(1600, 1, fail_at_start), std::runtime_error);
  }
}

TEST(ParallelLoops, RangeStartsOfHugeCountsDoNotOverflow) {
  constexpr std::size_t kHuge = std::numeric_limits<std::size_t>::max() - 3;
  EXPECT_EQ(range_start(kHuge, 16, 0), 0U);
  EXPECT_EQ(range_start(kHuge, 16, 16), kHuge);
  const std::size_t size = range_start(kHuge, 16, 1);
  EXPECT_EQ(size, kHuge / 16 + 1);  // the first (kHuge % 16) ranges take one more
  EXPECT_LT(range_start(kHuge, 16, 15), kHuge);
}

}  // namespace
}  // namespace shardwise::kernels::detail

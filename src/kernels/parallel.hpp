#pragma once
// Splits a kernel's loop among the calling thread's OpenMP threads: the count set_blas_threads
// gives it, the same runtime the BLAS threads on. Every range is contiguous and its items run in
// order, so a kernel whose items are independent (or that sums each item's terms inside the
// item) gives the same bits however the loop is cut: results do not depend on the thread count.
// Builds without OpenMP (ThreadSanitizer's, whose runtime does not see libgomp's
// synchronisation) run the loop on the calling thread.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace shardwise::kernels::detail {

// Ranges per thread, at most, that parallel_for cuts a loop into. The cores of a shared machine do
// not run at one speed (two cores each running the same FMA loop measured 46-55 GFLOP/s, which core
// the slower changing from one second to the next), so one range per thread leaves the faster
// thread waiting for the slower at the loop's end; with several, the faster takes more of them.
inline constexpr std::size_t kRangesPerThread = 8;

// The first item of range r when [0, count) is cut into `ranges` ranges whose sizes differ by
// at most one (no product of sizes, so no count overflows it).
inline std::size_t range_start(std::size_t count, std::size_t ranges, std::size_t r) {
  return r * (count / ranges) + std::min(r, count % ranges);
}

// The threads `count` items take with at most one thread for every `grain` items (small loops
// stay on one thread: starting a team costs microseconds); 1 inside a parallel region.
inline int loop_threads(std::size_t count, std::size_t grain) {
#if defined(_OPENMP)
  if (omp_in_parallel() != 0) return 1;
  const std::size_t by_work = count / std::max<std::size_t>(grain, 1);
  return static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(std::max(omp_get_max_threads(), 1)),
                            std::max<std::size_t>(by_work, 1)));
#else
  (void)count;
  (void)grain;
  return 1;
#endif
}

#if defined(_OPENMP)
// Runs work(thread, threads) on a team of `threads` OpenMP threads (OpenMP may start fewer; each
// learns how many). The first exception any thread throws is rethrown once all have finished.
template <class Work>
void on_team(int threads, Work&& work) {
  std::exception_ptr failure;
#pragma omp parallel num_threads(threads)
  {
    try {
      work(static_cast<std::size_t>(omp_get_thread_num()),
           static_cast<std::size_t>(omp_get_num_threads()));
    } catch (...) {
#pragma omp critical(shardwise_parallel_for_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}
#endif

// Calls body(first, last) on contiguous ranges that cover [0, count) once each. With T threads
// the loop is cut into T blocks, as parallel_split cuts it, and each block into up to
// kRangesPerThread ranges of at least `grain` items. Each thread runs its own block's ranges in
// order, then takes ranges left in the other blocks: where the threads keep pace each runs its
// own block, the rows an earlier kernel split the same way left in its core's cache, and where
// one falls behind the other takes over its last ranges. A body that pays for each call (packing
// an operand, say) uses parallel_split instead. The first exception a range throws is rethrown
// after the running ranges have finished, and ranges no thread has taken yet are skipped.
template <class Body>
void parallel_for(std::size_t count, std::size_t grain, Body&& body) {
  const int threads = loop_threads(count, grain);
  if (threads <= 1) {
    body(std::size_t{0}, count);
    return;
  }
#if defined(_OPENMP)
  const auto team = static_cast<std::size_t>(threads);
  const std::size_t per_block =
      std::clamp<std::size_t>(count / std::max<std::size_t>(grain, 1) / team, 1, kRangesPerThread);
  const std::size_t ranges = team * per_block;
  // The next range of each block, on a cache line of its own.
  struct alignas(64) Cursor {
    std::atomic<std::size_t> next{0};
  };
  std::vector<Cursor> cursors(team);
  // A thread may take any block: all are covered even where OpenMP starts fewer threads.
  on_team(threads, [&](std::size_t own, std::size_t /*started*/) {
    for (std::size_t k = 0; k < team; ++k) {
      const std::size_t block = (own + k) % team;
      std::atomic<std::size_t>& next = cursors[block].next;
      for (std::size_t r = next.fetch_add(1, std::memory_order_relaxed); r < per_block;
           r = next.fetch_add(1, std::memory_order_relaxed)) {
        const std::size_t range = block * per_block + r;
        try {
          body(range_start(count, ranges, range), range_start(count, ranges, range + 1));
        } catch (...) {
          for (Cursor& c : cursors) c.next.store(per_block, std::memory_order_relaxed);
          throw;
        }
      }
    }
  });
#endif
}

// Calls body(first, last) once on each thread, on contiguous ranges of equal size that cover
// [0, count): for a body with a cost per call that more ranges would multiply. Otherwise as
// parallel_for.
template <class Body>
void parallel_split(std::size_t count, std::size_t grain, Body&& body) {
  const int threads = loop_threads(count, grain);
  if (threads <= 1) {
    body(std::size_t{0}, count);
    return;
  }
#if defined(_OPENMP)
  on_team(threads, [&](std::size_t t, std::size_t n) {
    body(range_start(count, n, t), range_start(count, n, t + 1));
  });
#endif
}

}  // namespace shardwise::kernels::detail

#pragma once
// Splits a kernel's loop among the calling thread's OpenMP threads: the count set_blas_threads
// gives it, the same runtime the BLAS threads on. Each thread takes one contiguous range, so a
// kernel that sums in its range keeps the order a single thread would (results do not depend on
// the thread count). Builds without OpenMP (ThreadSanitizer's, whose runtime does not see
// libgomp's synchronisation) run the loop on the calling thread.

#include <algorithm>
#include <cstddef>
#include <exception>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace shardwise::kernels::detail {

// Calls body(begin, end) on ranges that cover [0, count), with at most one thread for every
// `grain` items (small loops stay on one thread: starting a team costs microseconds). The first
// exception a range throws is rethrown after every range has finished.
template <class Body>
void parallel_for(std::size_t count, std::size_t grain, Body&& body) {
#if defined(_OPENMP)
  const std::size_t by_work = count / std::max<std::size_t>(grain, 1);
  const int threads = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(std::max(omp_get_max_threads(), 1)),
                            std::max<std::size_t>(by_work, 1)));
  if (threads > 1 && omp_in_parallel() == 0) {
    std::exception_ptr failure;
#pragma omp parallel num_threads(threads)
    {
      const auto n = static_cast<std::size_t>(omp_get_num_threads());
      const auto t = static_cast<std::size_t>(omp_get_thread_num());
      try {
        body(count * t / n, count * (t + 1) / n);
      } catch (...) {
#pragma omp critical(shardwise_parallel_for_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    return;
  }
#else
  (void)grain;
#endif
  body(std::size_t{0}, count);
}

}  // namespace shardwise::kernels::detail

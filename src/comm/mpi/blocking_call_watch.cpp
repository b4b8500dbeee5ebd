#include "blocking_call_watch.hpp"

#include <mpi.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace shardwise::detail {
namespace {

using Clock = std::chrono::steady_clock;

// One blocking call at a time: the MPI backend calls MPI from one thread (MPI_THREAD_FUNNELED).
struct Watched {
  std::string what;
  std::chrono::milliseconds timeout{0};
  Clock::time_point deadline;
  std::uint64_t serial = 0;
};

class Watchdog {
 public:
  static Watchdog& instance() {
    // Never destroyed: the thread outlives static destruction, waiting.
    static auto* dog = new Watchdog();
    return *dog;
  }

  std::uint64_t watch(std::string what, std::chrono::milliseconds timeout,
                      Clock::time_point deadline) {
    const std::lock_guard lock(mutex_);
    watched_ = Watched{std::move(what), timeout, deadline, ++serial_};
    changed_.notify_all();
    return serial_;
  }

  void release(std::uint64_t serial) {
    const std::lock_guard lock(mutex_);
    if (watched_ && watched_->serial == serial) watched_.reset();
    changed_.notify_all();
  }

 private:
  Watchdog() {
    std::thread([this] { run(); }).detach();
  }

  [[noreturn]] void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return watched_.has_value(); });
      const std::uint64_t serial = watched_->serial;
      const Clock::time_point deadline = watched_->deadline;
      changed_.wait_until(lock, deadline, [&] { return !watched_ || watched_->serial != serial; });
      if (!watched_ || watched_->serial != serial || Clock::now() < deadline) continue;
      const std::string line = "shardwise: " + watched_->what + ": every member arrived, but it " +
                               "did not finish within " +
                               std::to_string(watched_->timeout.count()) +
                               " ms (a member stopped during it?); ending the job\n";
      // One write, so that mpirun's own lines cannot split it.
      (void)::write(STDERR_FILENO, line.data(), line.size());
      MPI_Abort(MPI_COMM_WORLD, 3);
      ::_exit(3);
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<Watched> watched_;
  std::uint64_t serial_ = 0;
};

}  // namespace

BlockingCallWatch::BlockingCallWatch(std::string what, std::chrono::milliseconds timeout,
                                     Clock::time_point deadline)
    : serial_(Watchdog::instance().watch(std::move(what), timeout, deadline)) {}

BlockingCallWatch::~BlockingCallWatch() { Watchdog::instance().release(serial_); }

}  // namespace shardwise::detail

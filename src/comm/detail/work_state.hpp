#pragma once
// What a Work handle points to. A backend derives from it: `progress` drives the operation
// (the MPI backend's requests progress only inside MPI calls) and `block` waits for it.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <memory>
#include <string>

#include "shardwise/comm/work.hpp"

namespace shardwise::detail {

class WorkState {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~WorkState() = default;

  // Drives the operation a step; true once it has finished.
  virtual bool progress() = 0;
  // Waits until it has finished or until `until` passes; true if it has finished.
  virtual bool block(std::optional<Clock::time_point> until) = 0;

  // Set once, when the operation has finished: its failure, if any.
  [[nodiscard]] std::optional<std::string> failure() const;
  [[nodiscard]] bool done() const;

  // Runs once, on the thread that first sees the operation finished successfully (the
  // Communicator counts its bytes here).
  void set_on_success(std::function<void()> on_success);
  void run_on_success();

 protected:
  // Backends call this exactly once.
  void finish(std::optional<std::string> failure);

  // For subclasses that hold mutex_ already.
  [[nodiscard]] bool done_unlocked() const { return done_; }

  mutable std::mutex mutex_;
  std::condition_variable finished_;

 private:
  bool done_ = false;
  std::optional<std::string> failure_;
  std::function<void()> on_success_;
};

// A state whose operation runs elsewhere (a worker thread) and reports when it is done.
class SignalledWorkState : public WorkState {
 public:
  bool progress() override { return done(); }
  bool block(std::optional<Clock::time_point> until) override;
  void complete(std::optional<std::string> failure) { finish(std::move(failure)); }
};

// The state behind a Work, for the Communicator and backends.
struct WorkAccess {
  static const std::shared_ptr<WorkState>& state(const Work& work) { return work.state_; }
};

}  // namespace shardwise::detail

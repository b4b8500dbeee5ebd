#include "shardwise/comm/work.hpp"

#include "detail/work_state.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

namespace detail {

std::optional<std::string> WorkState::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

bool WorkState::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void WorkState::set_on_success(std::function<void()> on_success) {
  std::lock_guard lock(mutex_);
  on_success_ = std::move(on_success);
}

void WorkState::run_on_success() {
  std::function<void()> callback;
  {
    std::lock_guard lock(mutex_);
    if (!done_ || failure_) return;
    callback = std::move(on_success_);
    on_success_ = nullptr;
  }
  if (callback) callback();
}

void WorkState::finish(std::optional<std::string> failure) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    failure_ = std::move(failure);
  }
  finished_.notify_all();
}

bool SignalledWorkState::block(std::optional<Clock::time_point> until) {
  std::unique_lock lock(mutex_);
  if (!until) {
    finished_.wait(lock, [&] { return done_unlocked(); });
    return true;
  }
  return finished_.wait_until(lock, *until, [&] { return done_unlocked(); });
}

}  // namespace detail

Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

bool Work::test() {
  if (!state_) return true;
  if (!state_->progress()) return false;
  state_->run_on_success();
  return true;
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  if (!state_) return;
  std::optional<detail::WorkState::Clock::time_point> until;
  if (timeout) until = detail::WorkState::Clock::now() + *timeout;
  if (!state_->block(until)) {
    throw CommError("the operation is still in flight after " + std::to_string(timeout->count()) +
                    " ms");
  }
  if (auto failure = state_->failure()) throw CommError(*failure);
  state_->run_on_success();
}

bool Work::finished() const { return !state_ || state_->done(); }

std::optional<std::string> Work::error() const {
  return state_ ? state_->failure() : std::nullopt;
}

}  // namespace shardwise

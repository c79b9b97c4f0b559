#include "comm/async_queue.hpp"

#include "core/thread_name.hpp"

namespace cohort {

void Work::wait() {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  state_->changed.wait(lock, [&] { return state_->completed; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::completed() const noexcept {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->completed;
}

}  // namespace cohort

namespace cohort::detail {

AsyncQueue::~AsyncQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Work AsyncQueue::push(std::function<void()> operation) {
  auto state = std::make_shared<WorkState>();
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back({std::move(operation), state});
    if (!thread_.joinable()) {
      thread_ = std::thread([this] {
        detail::name_this_thread("cohort-async");
        run();
      });
    }
  }
  changed_.notify_all();
  return Work(state);
}

void AsyncQueue::drain() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return tasks_.empty() && !busy_; });
}

void AsyncQueue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      task.operation();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard done(task.state->mutex);
      task.state->completed = true;
      task.state->error = error;
    }
    task.state->changed.notify_all();
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace cohort::detail

// The thread that runs a communicator's `*_async` operations, one at a time
// in the order they were queued, and the shared state behind each Work.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <cohort/communicator.hpp>

namespace cohort::detail {

struct WorkState {
  std::mutex mutex;
  std::condition_variable changed;
  bool completed = false;
  std::exception_ptr error;
};

class AsyncQueue {
 public:
  AsyncQueue() = default;
  /// Runs what is queued to the end, then stops the thread.
  ~AsyncQueue();
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;

  /// Queues `operation`; its exception, if any, goes to the Work. The thread
  /// starts with the first operation.
  Work push(std::function<void()> operation);
  /// Returns once every queued operation has ended.
  void drain();

 private:
  struct Task {
    std::function<void()> operation;
    std::shared_ptr<WorkState> state;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Task> tasks_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace cohort::detail

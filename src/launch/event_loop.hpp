// The one event loop of a supervisor: cohort run's agent and the --hostfile
// launcher both run on it. It waits on readable descriptors, on the
// signals it was given (blocked for its lifetime and read from a signalfd)
// and on named deadlines, and polls nothing. Time comes from a LoopClock, a
// seam that unit tests replace to move time by hand.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <signal.h>

#include "core/fd.hpp"
#include "launch/signal_guard.hpp"

namespace cohort::detail {

class LoopClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~LoopClock() = default;
  virtual TimePoint now() const = 0;
};

/// std::chrono::steady_clock, the clock of every real loop.
const LoopClock& real_clock();

class EventLoop {
 public:
  /// Blocks `signals` (restored on destruction; SIGPIPE is ignored meanwhile)
  /// and reads them from a signalfd; an empty set makes none. Throws
  /// cohort::Error when epoll or signalfd cannot be made.
  explicit EventLoop(const sigset_t& signals, const LoopClock& clock = real_clock());
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  /// Calls `readable` whenever `fd` can be read (or is at end-of-file).
  void watch(int fd, std::function<void()> readable);
  void unwatch(int fd);

  /// Calls `handler` with each signal of the set that arrives.
  void on_signal(std::function<void(int)> handler) { on_signal_ = std::move(handler); }

  /// Arms deadline `name`, replacing one of that name: `fire` runs once
  /// `after` has passed on the clock.
  void set_deadline(int name, std::chrono::milliseconds after, std::function<void()> fire);
  void cancel_deadline(int name) { deadlines_.erase(name); }
  bool has_deadline(int name) const { return deadlines_.count(name) != 0; }

  /// Waits until something is ready, the nearest deadline, or `limit`,
  /// and handles all of it. Throws cohort::Error when epoll fails.
  void turn(std::optional<std::chrono::milliseconds> limit = std::nullopt);

  const LoopClock& clock() const noexcept { return clock_; }

 private:
  struct Deadline {
    LoopClock::TimePoint when;
    std::function<void()> fire;
  };
  void fire_due_deadlines();

  const LoopClock& clock_;
  std::unique_ptr<SignalGuard> guard_;
  Fd epoll_;
  Fd signals_;
  std::map<int, std::function<void()>> watched_;  // fd -> callback
  std::function<void(int)> on_signal_;
  std::map<int, Deadline> deadlines_;  // name -> deadline
};

}  // namespace cohort::detail

// The children a supervisor runs (the agent's workers, the --hostfile
// launcher's ssh agents), each leading its own process group, and the one
// way they are stopped: a signal now, SIGKILL for those still running once
// the grace has passed on the event loop's clock. What is done to the
// processes goes through ProcessControl, a seam that unit tests fake.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include <sys/types.h>

#include "launch/event_loop.hpp"

namespace cohort::detail {

class ProcessControl {
 public:
  virtual ~ProcessControl() = default;
  /// Sends `signal` to process group `pgid`.
  virtual void signal_group(pid_t pgid, int signal) = 0;
  /// Whether child `pid` has ended, without reaping it: until it is reaped
  /// its pid, which names its group, cannot be reused.
  virtual bool ended(pid_t pid) = 0;
  /// Reaps child `pid` (ended, or SIGKILLed: waits) and returns its wait status.
  virtual int reap(pid_t pid) = 0;
};

/// killpg and waitpid.
ProcessControl& system_processes();

class ProcessSet {
 public:
  struct Member {
    pid_t pid = -1;
    bool running = false;
    bool signalled = false;  ///< stopped by us: a stopping signal was sent to it
    int wait_status = 0;
    std::chrono::system_clock::time_point ended;
  };

  /// `deadline` names the grace deadline on `loop`.
  ProcessSet(EventLoop& loop, ProcessControl& control, int deadline);
  /// SIGKILLs and reaps every member still running: the supervisor is
  /// leaving (an exception), and none may outlive it.
  ~ProcessSet();
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  /// A running child leading process group `pid`; returns its index.
  std::size_t add(pid_t pid);
  /// Forgets every member (a new attempt); they must all have ended.
  void clear();

  const Member& operator[](std::size_t index) const { return members_[index]; }
  std::size_t size() const noexcept { return members_.size(); }
  bool any_running() const;
  bool stopping() const noexcept { return stopping_; }

  /// Reaps the members that ended (on SIGCHLD): for each, SIGKILLs its
  /// group (what it left there must not outlive it), calls
  /// `before_reap(index)` while its pid still names it, reaps it, then calls
  /// `ended(index)`. When none is left running, the grace deadline is dropped.
  void reap(const std::function<void(std::size_t)>& before_reap,
            const std::function<void(std::size_t)>& ended);

  /// Sends `signal` to every running member's group; `stopping` marks them
  /// as stopped by us (for the report).
  void signal_all(int signal, bool stopping);

  /// Stops every running member: `signal` now, SIGKILL after `grace`. Asked
  /// again while stopping: SIGKILL at once.
  void stop(int signal, std::chrono::milliseconds grace);

 private:
  EventLoop& loop_;
  ProcessControl& control_;
  int deadline_;
  std::vector<Member> members_;
  bool stopping_ = false;
};

}  // namespace cohort::detail

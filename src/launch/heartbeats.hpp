// How a node is found lost, apart from the store and the thread that reads
// it: every interval each agent adds 1 to its heartbeat counter, and whoever
// watches (node 0, or the --hostfile launcher) checks that every counter
// moves. A counter still for the heartbeat timeout means the agent is gone
// (killed, its node down, its network cut). Pure: time is an argument, so
// tests move it by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace cohort::detail {

class HeartbeatWatch {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit HeartbeatWatch(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  /// An attempt of `nodes` nodes begins at `now`. `arrived`: every node has
  /// joined already; else each is awaited (arrive()) before it is watched.
  void begin(std::size_t nodes, TimePoint now, bool arrived);
  bool arrived(std::size_t node) const { return beats_.at(node).arrived; }
  /// The node joined: its counter is watched from `now`.
  void arrive(std::size_t node, TimePoint now);
  /// The node's counter reads `count` at `now`: whether it has not moved
  /// for the heartbeat timeout.
  bool stalled(std::size_t node, std::int64_t count, TimePoint now);

 private:
  struct Beat {
    std::int64_t count = -1;
    TimePoint changed;
    bool arrived = false;
  };
  std::chrono::milliseconds timeout_;
  std::vector<Beat> beats_;
};

/// Whether a node's heartbeat thread ends once it has seen its attempt's
/// stop: a node that serves the store (`coordinator`) watches to the end;
/// another keeps beating while the job may restart, so that a node that
/// stops and starts again is never taken for lost. `may_restart` is read
/// before `attempt_now`, which the restart moves before it uses the
/// budget: a restart that has just used the last of it is still seen as
/// one (`attempt_now` != `attempt_stopped`).
bool heartbeats_end(bool coordinator, bool may_restart, int attempt_now,
                    int attempt_stopped) noexcept;

}  // namespace cohort::detail

#include "launch/heartbeats.hpp"

namespace cohort::detail {

void HeartbeatWatch::begin(std::size_t nodes, TimePoint now, bool arrived) {
  beats_.assign(nodes, Beat{-1, now, arrived});
}

void HeartbeatWatch::arrive(std::size_t node, TimePoint now) {
  Beat& beat = beats_.at(node);
  beat.arrived = true;
  beat.changed = now;
}

bool HeartbeatWatch::stalled(std::size_t node, std::int64_t count, TimePoint now) {
  Beat& beat = beats_.at(node);
  if (!beat.arrived) return false;
  if (count != beat.count) {
    beat.count = count;
    beat.changed = now;
    return false;
  }
  return now - beat.changed >= timeout_;
}

bool heartbeats_end(bool coordinator, bool may_restart, int attempt_now,
                    int attempt_stopped) noexcept {
  return !coordinator && !may_restart && attempt_now == attempt_stopped;
}

}  // namespace cohort::detail

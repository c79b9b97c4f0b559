// The job's timeline (`cohort run --trace FILE`): what each agent saw,
// as Chrome trace-event JSON (the format ui.perfetto.dev and chrome://tracing
// open). A track per node (a "process": its agent, pid = node id + 1; the
// --hostfile launcher is pid 0) and, inside it, one per rank (a "thread",
// tid = rank + 1; the agent's own is tid 0): the rendezvous, each attempt,
// each worker from spawn to exit, stops with their reason, restarts,
// membership changes, the exit status. Every node's events go through the
// job's store to whoever writes the file, which merges them on one time
// axis (wall clock: the nodes' clocks are assumed in step, as NTP keeps
// them).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace cohort::detail {

class Timeline {
 public:
  using Clock = std::chrono::system_clock;
  using Args = std::vector<std::pair<std::string, std::string>>;
  /// The agent's own track, beside its ranks'.
  static constexpr int kAgentTrack = -1;

  /// `node`: this agent's id for the job (-1: the --hostfile launcher);
  /// `host` names its track.
  Timeline(int node, std::string host);

  /// Something that took time on `rank`'s track (kAgentTrack: the agent's).
  void span(const std::string& name, int rank, Clock::time_point begin, Clock::time_point end,
            const Args& args = {});
  /// A moment on `rank`'s track.
  void instant(const std::string& name, int rank, const Args& args = {},
               Clock::time_point when = Clock::now());
  /// This node's events (a JSON array), with its tracks' names.
  std::string events() const;

  /// The trace file's text: `node_events` (as events() gives them, from
  /// every node) in one object, times from the first event on. Malformed
  /// parts are left out, and `about` goes in as the trace's metadata.
  static std::string merge(const std::vector<std::string>& node_events, const Args& about);

 private:
  int pid() const { return node_ + 1; }
  void name_track(int rank);

  int node_;
  std::string host_;
  std::vector<std::string> events_;  // each one JSON object
  std::vector<int> named_;           // tracks named so far
};

/// The track of node `node` (on `host`) whose events never reached the
/// writer: one instant, "no events", saying `why`, so that the file shows
/// the node and why it is empty rather than leaving it out.
std::string missing_node_events(int node, const std::string& host, const std::string& why);

/// Writes the trace file of a job: every node's events (Timeline::merge),
/// with the job's run id, command and exit status as its metadata; or says
/// on standard error why it could not.
void write_job_trace(const std::string& path, const std::vector<std::string>& node_events,
                     const std::string& run_id, const std::vector<std::string>& command,
                     int exit_code);

/// Microseconds since the epoch, as trace events count time.
long long trace_microseconds(Timeline::Clock::time_point when);

}  // namespace cohort::detail

// What a `cohort run` process is beyond what its user asked for
// (RunOptions): set by cohort itself, for an agent that a `--hostfile`
// launcher started over ssh or for cohort::spawn, and never by a user, so it
// stays out of the public header.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <cohort/launch.hpp>

namespace cohort::detail {

struct AgentRole {
  /// Another process (the --hostfile launcher) serves the job's store:
  /// node 0's agent must not.
  bool store_served_elsewhere = false;
  /// Stop the job when standard input ends: an agent started over ssh,
  /// whose launcher holds the other end.
  bool stop_on_stdin_eof = false;
  /// The host expected at each node rank, for messages (the hostfile).
  std::vector<std::string> node_hosts;
  /// Set by cohort::spawn: workers are forks of this process that run it,
  /// not a PROGRAM (RunOptions::command then only names them in reports).
  std::function<int()> entry;
};

/// Runs one agent's job, as cohort::run does for RunOptions alone.
int run_agent_job(const RunOptions& options, AgentRole role);

}  // namespace cohort::detail

// `cohort run --hostfile FILE` / `--hosts h1:2,h2:2`: one command starts an
// agent on every host over ssh. This process serves the job's store, watches
// the agents' heartbeats, and is the job's one fate: when it stops (Ctrl-C,
// a failure anywhere), every agent stops its workers by their process
// groups; when it or its ssh dies, each remote agent sees its standard input
// end and stops by itself. Nothing is ever killed by name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <cohort/launch.hpp>
#include <cohort/launch_env.hpp>

#include "launch/run_plan.hpp"

namespace cohort::detail {

/// Lines "host [slots=N]" ('#' starts a comment, blank lines are skipped),
/// as mpirun and DeepSpeed read them. Throws InvalidArgument naming `source`
/// and the line.
std::vector<RunOptions::Host> parse_hostfile(std::string_view text, std::string_view source);

/// "h1:2,h2:2,h3" (slots after the colon, optional).
std::vector<RunOptions::Host> parse_host_list(std::string_view list);

/// Where the remote agents reach this process's store.
struct StoreEndpoint {
  std::string host;
  int port = 0;
};

/// The plan of the agent on host `node_rank`: the job's options, that
/// host's share of them, and where the store is (run_plan.hpp carries it to
/// `cohort agent` on the agent's standard input). Pure, for tests.
RunPlan remote_agent_plan(const RunOptions& options, int node_rank, const StoreEndpoint& store);

/// The shell command line ssh runs on every host: cd to `cwd`, set the
/// variables `options` forwards (from `env`), exec `cohort agent`, which
/// reads its plan from standard input. Pure, for tests.
std::string remote_agent_command(const RunOptions& options, const std::string& cwd,
                                 const std::string& cohort_path, const Environment& env);

/// Runs the job; returns its exit status like cohort::run.
int run_over_ssh(const RunOptions& options);

}  // namespace cohort::detail

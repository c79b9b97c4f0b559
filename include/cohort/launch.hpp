// Launching: `cohort run`'s agent as a library call. It starts the job's
// rendezvous store, spawns the workers with torchrun's environment plus
// cohort's, routes their output, supervises them (the first failure stops
// them all), reports the failure, and restarts the group when asked.
// docs/run.md describes the behaviour in full.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort {

struct RunOptions {
  /// PROGRAM and its arguments. A PROGRAM ending in ".py" runs with `python`.
  std::vector<std::string> command;
  int nproc_per_node = 1;
  /// What workers get as MASTER_ADDR / MASTER_PORT (rank 0 binds it, as under
  /// torchrun). Port 0: a port free at start, never the agent store's own.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  /// Restarts of the whole worker group after a failure, for the whole job.
  int max_restarts = 0;
  /// Between SIGTERM and SIGKILL, on every stop path.
  std::chrono::milliseconds grace{5000};
  /// Signals forwarded to the workers, by name ("TERM", "SIGUSR1") or number.
  /// TERM, INT, HUP and QUIT also stop the job (SIGKILL after `grace`); the
  /// others (USR1, USR2) are only passed on. Empty: TERM INT HUP QUIT USR1 USR2.
  std::vector<std::string> signals;
  /// Per-rank files DIR/attempt_<k>/rank_<r>/{stdout,stderr}.log; "" for none.
  std::string log_dir;
  /// Console line prefix with {rank}, {local_rank}, {host}; nullopt: "[{rank}] "
  /// when there is more than one worker, none for one; "" for none.
  std::optional<std::string> prefix;
  /// Ranks whose output reaches the console; empty: all. Log files get all.
  std::set<int> console_ranks;
  /// Legacy torch.distributed.launch: append --local_rank=N to the arguments.
  bool local_rank_arg = false;
  /// COHORT_RUN_ID / TORCHELASTIC_RUN_ID; "": a random id.
  std::string run_id;
  /// Interpreter for .py programs.
  std::string python = "python3";
};

/// Runs the job to its end and returns its exit status, shell convention:
/// 0, the first failed worker's code, 128+signal when it was killed, 130 after
/// Ctrl-C. Throws cohort::Error when the job cannot start (store, pipes ...).
int run(const RunOptions& options);

}  // namespace cohort

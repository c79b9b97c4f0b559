// What each worker is started with: its command line and its environment.
// Pure functions of the options, so every case is a unit test.
#pragma once

#include <string>
#include <vector>

#include <cohort/launch.hpp>
#include <cohort/launch_env.hpp>

namespace cohort::detail {

/// Who a worker is and how it reaches the others.
struct WorkerIdentity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  std::string master_addr;
  int master_port = 0;
  std::string store_addr;  ///< the agent's store, never MASTER_PORT
  int store_port = 0;
  std::string job_token;
};

/// PROGRAM ARGS, with `python PROGRAM ARGS` for a .py program and
/// `--local_rank=N` appended under `local_rank_arg`.
std::vector<std::string> worker_argv(const RunOptions& options, int local_rank);

/// `base` plus torchrun's variables (RANK LOCAL_RANK WORLD_SIZE
/// LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_RANK ROLE_WORLD_SIZE
/// ROLE_NAME MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID
/// TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS
/// TORCHELASTIC_USE_AGENT_STORE) and cohort's (COHORT_RUN_ID COHORT_STORE_ADDR
/// COHORT_STORE_PORT COHORT_JOB_TOKEN). OMP_NUM_THREADS, when unset, becomes
/// the usable CPUs divided among the local workers (at least 1).
Environment worker_environment(const Environment& base, const WorkerIdentity& worker,
                               int usable_cpus);

}  // namespace cohort::detail

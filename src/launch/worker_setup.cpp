#include "launch/worker_setup.hpp"

#include <algorithm>

#include "core/strings.hpp"

namespace cohort::detail {

std::vector<std::string> worker_argv(const RunOptions& options, int local_rank) {
  std::vector<std::string> argv;
  const std::string& program = options.command.front();
  if (program.size() > 3 && program.compare(program.size() - 3, 3, ".py") == 0) {
    argv.push_back(options.python);
  }
  argv.insert(argv.end(), options.command.begin(), options.command.end());
  if (options.local_rank_arg) argv.push_back(cat("--local_rank=", local_rank));
  return argv;
}

Environment worker_environment(const Environment& base, const WorkerIdentity& worker,
                               int usable_cpus) {
  Environment env = base;
  const auto put = [&env](const char* name, const auto& value) { env[name] = cat(value); };
  put("RANK", worker.rank);
  put("LOCAL_RANK", worker.local_rank);
  put("WORLD_SIZE", worker.world_size);
  put("LOCAL_WORLD_SIZE", worker.local_world_size);
  put("GROUP_RANK", worker.node_rank);
  put("GROUP_WORLD_SIZE", worker.num_nodes);
  put("ROLE_RANK", worker.rank);
  put("ROLE_WORLD_SIZE", worker.world_size);
  put("ROLE_NAME", "default");
  put("MASTER_ADDR", worker.master_addr);
  put("MASTER_PORT", worker.master_port);
  put("TORCHELASTIC_RUN_ID", worker.run_id);
  put("TORCHELASTIC_RESTART_COUNT", worker.restart_count);
  put("TORCHELASTIC_MAX_RESTARTS", worker.max_restarts);
  // MASTER_PORT is rank 0's to bind, not an agent's store (torch reads this).
  put("TORCHELASTIC_USE_AGENT_STORE", "False");
  put("COHORT_RUN_ID", worker.run_id);
  put("COHORT_STORE_ADDR", worker.store_addr);
  put("COHORT_STORE_PORT", worker.store_port);
  put("COHORT_JOB_TOKEN", worker.job_token);
  if (env.count("OMP_NUM_THREADS") == 0) {
    put("OMP_NUM_THREADS", std::max(1, usable_cpus / std::max(1, worker.local_world_size)));
  }
  return env;
}

}  // namespace cohort::detail

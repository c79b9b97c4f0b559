#include "launch/worker_setup.hpp"

#include "core/strings.hpp"

namespace cohort::detail {

bool runs_with_python(const RunOptions& options) {
  if (options.no_python) return false;
  if (options.module || options.run_path) return true;
  const std::string& program = options.command.front();
  return program.size() > 3 && program.compare(program.size() - 3, 3, ".py") == 0;
}

std::vector<std::string> worker_argv(const RunOptions& options, int local_rank) {
  std::vector<std::string> argv;
  if (runs_with_python(options)) argv.push_back(options.python);
  if (options.module && !options.no_python) argv.emplace_back("-m");
  argv.insert(argv.end(), options.command.begin(), options.command.end());
  using Style = RunOptions::LocalRankArg;
  if (options.local_rank_arg == Style::underscore) argv.push_back(cat("--local_rank=", local_rank));
  if (options.local_rank_arg == Style::dash) argv.push_back(cat("--local-rank=", local_rank));
  return argv;
}

Environment worker_environment(const Environment& base, const WorkerIdentity& worker) {
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
  put("ROLE_NAME", worker.role);
  put("MASTER_ADDR", worker.master_addr);
  put("MASTER_PORT", worker.master_port);
  put("TORCHELASTIC_RUN_ID", worker.run_id);
  put("TORCHELASTIC_RESTART_COUNT", worker.restart_count);
  put("TORCHELASTIC_MAX_RESTARTS", worker.max_restarts);
  // True: every rank is a client of the agent's store on MASTER_PORT; False:
  // MASTER_PORT is rank 0's to bind (torch reads exactly "True").
  put("TORCHELASTIC_USE_AGENT_STORE", worker.agent_store ? "True" : "False");
  if (worker.error_file.empty()) {
    env.erase("TORCHELASTIC_ERROR_FILE");  // another launcher's file is not this worker's
  } else {
    put("TORCHELASTIC_ERROR_FILE", worker.error_file);
  }
  // As torchrun 2.x: a NCCL error ends the process instead of hanging it.
  // Only PyTorch 2.2's name: 2.x warns on every rank that the old one
  // (NCCL_ASYNC_ERROR_HANDLING, all 1.x reads) is deprecated, and Debian's
  // 1.13 has no NCCL. A user's own setting of either wins.
  if (env.count("NCCL_ASYNC_ERROR_HANDLING") == 0 &&
      env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING") == 0) {
    put("TORCH_NCCL_ASYNC_ERROR_HANDLING", 1);
  }
  put("COHORT_RUN_ID", worker.run_id);
  put("COHORT_STORE_ADDR", worker.store_addr);
  put("COHORT_STORE_PORT", worker.store_port);
  put("COHORT_JOB_TOKEN", worker.job_token);
  if (worker.store_process.empty()) {
    env.erase("COHORT_STORE_PROCESS");  // an outer job's store is not this worker's
  } else {
    put("COHORT_STORE_PROCESS", worker.store_process);
  }
  if (worker.store_fd < 0) {
    env.erase("COHORT_STORE_FD");  // an outer job's descriptor means nothing here
  } else {
    put("COHORT_STORE_FD", worker.store_fd);
  }
  if (worker.store_munge) {
    put("COHORT_STORE_MUNGE", 1);
  } else {
    env.erase("COHORT_STORE_MUNGE");
  }
  if (env.count("OMP_NUM_THREADS") == 0 && worker.omp_threads > 0) {
    put("OMP_NUM_THREADS", worker.omp_threads);
  }
  if (!worker.cuda_visible_devices.empty()) {
    put("CUDA_VISIBLE_DEVICES", worker.cuda_visible_devices);
    if (env.count("CUDA_DEVICE_ORDER") == 0) put("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  }
  if (!worker.cpus.empty()) {
    put("COHORT_CPUS", worker.cpus);
  } else {
    env.erase("COHORT_CPUS");  // an outer cohort run's binding is not this worker's
  }
  // Without them gloo, NCCL and TensorPipe each guess from the host name,
  // and fall back to loopback when it does not resolve to a local address:
  // across nodes, a hang or "connection refused". A user's own value wins.
  if (!worker.socket_interface.empty()) {
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"}) {
      if (env.count(name) == 0) put(name, worker.socket_interface);
    }
  }
  return env;
}

}  // namespace cohort::detail

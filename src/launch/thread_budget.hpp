// OMP_NUM_THREADS for workers that find it unset: the CPUs this job may use
// here, divided among the workers that share them. torchrun sets a blanket 1;
// a bare `cohort run` on a laptop should use the cores, and under Slurm the
// job's allocation, not the host's CPU count, is what there is to share.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <cohort/launch_env.hpp>

namespace cohort::detail {

/// What this process may run on.
struct CpuFacts {
  int online = 1;             ///< CPUs online on the host
  int affinity = 1;           ///< CPUs in this process's affinity mask
  double cgroup_quota = 0.0;  ///< CPUs the cgroup's quota allows; 0: no quota
};

/// The facts of this process: sched_getaffinity, sysconf, and the cgroup's
/// cpu.max (v2) or cpu.cfs_quota_us / cpu.cfs_period_us (v1).
CpuFacts probe_cpu_facts();

/// cgroup v2's cpu.max ("max 100000", "200000 100000") in CPUs; nullopt for
/// no quota or text that does not parse.
std::optional<double> parse_cpu_max(std::string_view text);
/// cgroup v1's pair (quota -1: none).
std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period);

struct ThreadBudget {
  int threads = 1;
  std::string source;  ///< "SLURM_CPUS_PER_TASK=8 shared by 2 workers of this task"
};

/// Threads for each worker of an agent that runs `agent_workers` of the
/// `node_workers` workers on this node. The smallest share wins among:
/// SLURM_CPUS_PER_TASK / agent_workers (else SLURM_CPUS_ON_NODE /
/// node_workers), the affinity mask (a mask narrower than the host is this
/// task's own, shared by its agent's workers; the whole host is shared by
/// every worker on the node), and the cgroup quota / node_workers. At least 1.
ThreadBudget thread_budget(const Environment& env, const CpuFacts& cpus, int agent_workers,
                           int node_workers);

}  // namespace cohort::detail

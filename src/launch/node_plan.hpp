// How one `cohort run` takes part in its job, decided before it starts: the
// only agent on one node; one of several placed by flags (torchrun's static
// form: --nnodes, --node-rank); one of several numbered at the rendezvous
// (torchrun's c10d form: --nnodes and --rdzv-endpoint, no --node-rank); or
// one per task of another launcher (srun, mpirun), with -n workers per task
// when each node has one task, or one worker per task when it has several.
// Inside a Slurm allocation but outside a step it starts that step itself.
// Pure functions of the options and the environment, so every case is a
// unit test.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <cohort/launch.hpp>
#include <cohort/launch_env.hpp>

#include "launch/agent_role.hpp"
#include "launch/node_group.hpp"

namespace cohort::detail {

struct AgentPlan {
  NodeGroupOptions group;
  /// What the agent reports as its node at the rendezvous (agents on one
  /// node share its local ranks): itself, its host name, or the launcher's
  /// node id (SLURM_NODEID).
  enum class NodeName { agent, host, launcher_node };
  NodeName node_name = NodeName::agent;
  int launcher_node = 0;
  /// MASTER_ADDR for the workers when the agent store is off; "" = where the
  /// store is reached (the job's rank 0 runs on that host).
  std::string master_addr;
  /// Another launcher started one task per worker: its variables (SLURM_PROCID,
  /// OMPI_COMM_WORLD_RANK ...) already describe the worker.
  bool one_worker_per_task = false;
  /// The store's address went through mpirun's key-value service (PMIx or
  /// PMI-1): this rank's connection to mpirun is used up for its workers.
  bool used_mpi_service = false;
};

/// The plan for `options` (and `role`) in a process whose own launch environment is
/// `outer`. Throws InvalidArgument for a geometry that makes no sense (several
/// tasks per node and -n > 1; more workers than the GPUs Slurm gave a node;
/// --nnodes that disagrees with the launcher), naming the forms that work.
AgentPlan plan_agent(const RunOptions& options, const AgentRole& role, const LaunchInfo& outer,
                     const Environment& env);

/// GPUs this node may use, when the environment says: CUDA_VISIBLE_DEVICES,
/// else SLURM_GPUS_ON_NODE; -1 when unknown.
int gpus_in_environment(const Environment& env);

/// Inside a Slurm allocation of several nodes but outside a job step (an
/// sbatch script, an salloc shell): the srun command line that runs
/// `self_argv` once per node. nullopt anywhere else.
std::optional<std::vector<std::string>> srun_for_allocation(
    const Environment& env, const std::vector<std::string>& self_argv);

}  // namespace cohort::detail

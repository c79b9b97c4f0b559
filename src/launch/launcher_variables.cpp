#include "launch/launcher_variables.hpp"

#include <vector>

#include "core/strings.hpp"
#include "env/slurm_counts.hpp"

namespace cohort::detail {

void describe_worker_to_launchers(Environment& env, const WorkerPlace& place,
                                  const WorkerLayout& layout) {
  const auto rewrite = [&env](const char* name, const std::string& value) {
    if (auto found = env.find(name); found != env.end()) found->second = value;
  };
  const std::string rank = cat(place.rank);
  const std::string world = cat(layout.world_size);
  const std::string local_rank = cat(place.local_rank);
  const std::string local_size = cat(place.local_world_size);

  rewrite("SLURM_PROCID", rank);
  rewrite("SLURM_LOCALID", local_rank);
  for (const char* name : {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS"})
    rewrite(name, world);
  const std::string counts = format_slurm_counts(layout.workers_per_node);
  rewrite("SLURM_TASKS_PER_NODE", counts);
  rewrite("SLURM_STEP_TASKS_PER_NODE", counts);
  rewrite("SLURM_NTASKS_PER_NODE", local_size);
  std::vector<std::string> ranks;
  for (int other : layout.ranks_on_my_node)
    ranks.push_back(cat(other));
  rewrite("SLURM_GTIDS", join(ranks, ","));
  // srun reads SLURM_NTASKS as its -n: a nested srun in a worker now asks for
  // as many tasks as there are workers, more than the CPUs the allocation
  // counted for the agent tasks. Let it, as a per-task srun's would run.
  if (env.count("SLURM_NTASKS") != 0 && env.count("SLURM_OVERCOMMIT") == 0) {
    env["SLURM_OVERCOMMIT"] = "1";
  }

  rewrite("OMPI_COMM_WORLD_RANK", rank);
  rewrite("OMPI_COMM_WORLD_SIZE", world);
  rewrite("OMPI_COMM_WORLD_LOCAL_RANK", local_rank);
  rewrite("OMPI_COMM_WORLD_LOCAL_SIZE", local_size);
  rewrite("OMPI_COMM_WORLD_NODE_RANK", local_rank);  // Open MPI's name for a node-local rank

  rewrite("PMI_RANK", rank);
  rewrite("PMI_SIZE", world);
  rewrite("MPI_LOCALRANKID", local_rank);
  rewrite("MPI_LOCALNRANKS", local_size);
  rewrite("PMIX_RANK", rank);
}

}  // namespace cohort::detail

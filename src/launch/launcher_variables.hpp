// A consistent world for scripts that take their rank from their launcher's
// variables. Under `srun -N2 cohort run -n 2 train.py`, srun describes each
// agent task (SLURM_PROCID=0 on both workers of node 0), while RANK describes
// the worker: Ignite's idist and Lightning's SLURMEnvironment then find two
// rank 0s, or refuse. cohort rewrites, in each worker's environment, the
// variables that describe a task so that they describe the worker, as if the
// launcher had started one task per worker. Only variables already present
// are rewritten, and only the ones that describe a task; those that describe
// the job, the allocation or the node are kept (docs/run.md has the list).
#pragma once

#include <cohort/launch_env.hpp>

#include "launch/worker_layout.hpp"

namespace cohort::detail {

/// Rewrites, for the worker at `place` in `layout`, what each launcher's row
/// (env/launchers) rewrites: Slurm's SLURM_PROCID SLURM_LOCALID SLURM_NTASKS
/// SLURM_NPROCS SLURM_STEP_NUM_TASKS SLURM_TASKS_PER_NODE
/// SLURM_STEP_TASKS_PER_NODE SLURM_NTASKS_PER_NODE SLURM_GTIDS (and
/// SLURM_OVERCOMMIT=1 next to a rewritten SLURM_NTASKS, unless set, so that
/// a nested srun, which takes SLURM_NTASKS for its -n, still starts); Open
/// MPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE,NODE_RANK}; MPICH's
/// PMI_RANK PMI_SIZE MPI_LOCALRANKID MPI_LOCALNRANKS; PMIX_RANK.
void describe_worker_to_launchers(Environment& env, const WorkerPlace& place,
                                  const WorkerLayout& layout);

}  // namespace cohort::detail

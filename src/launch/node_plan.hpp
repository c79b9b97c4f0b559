// Where `cohort run` stands when another launcher started it: one task of a
// Slurm step becomes one node's agent; inside an allocation but outside a
// step it starts that step itself. Pure functions of the environment, so
// every case is a unit test.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <cohort/launch.hpp>
#include <cohort/launch_env.hpp>

namespace cohort::detail {

/// Under a Slurm step of several tasks, makes `options` one agent per task:
/// node rank SLURM_PROCID, nnodes SLURM_NTASKS, node 0 at the first host of
/// the step's nodelist, the rendezvous port and token from the job and step
/// ids. Throws InvalidArgument for a geometry that makes no sense (several
/// tasks per node and nproc > 1; more workers than the GPUs Slurm gave a
/// node), with a message that shows the two forms that work. Under another
/// launcher with several ranks (mpirun -np 2 cohort run) it throws too.
/// `visible_gpus` < 0: unknown.
void place_under_launcher(RunOptions& options, const LaunchInfo& outer, const Environment& env,
                          int visible_gpus);

/// Inside a Slurm allocation of several nodes but outside a job step (an
/// sbatch script, an salloc shell): the srun command line that runs
/// `self_argv` once per node. nullopt anywhere else.
std::optional<std::vector<std::string>> srun_for_allocation(
    const Environment& env, const std::vector<std::string>& self_argv);

}  // namespace cohort::detail

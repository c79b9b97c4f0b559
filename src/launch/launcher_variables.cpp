#include "launch/launcher_variables.hpp"

#include "env/launchers/launcher.hpp"

namespace cohort::detail {

void describe_worker_to_launchers(Environment& env, const WorkerPlace& place,
                                  const WorkerLayout& layout) {
  const WorkerSeat seat{place.rank,
                        layout.world_size,
                        place.local_rank,
                        place.local_world_size,
                        layout.workers_per_node,
                        layout.ranks_on_my_node};
  // Every launcher's, not only the detected one's: srun --mpi=pmix sets
  // Slurm's and PMIx's, Open MPI's mpirun also PMIx's.
  for (const LauncherEntry& launcher : launchers()) {
    if (launcher.describe_worker != nullptr) launcher.describe_worker(env, seat);
  }
}

}  // namespace cohort::detail

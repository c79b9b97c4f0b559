// No launcher: one process on its own.
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"

namespace cohort::detail {
namespace {

// Rank 0 of 1 (notes an enclosing Slurm allocation).
Detection read_single(const EnvReader& env) {
  Detection out;
  LaunchInfo& info = out.info;
  const std::string why = "single process: no launcher variables";
  info.launcher = {Launcher::single,
                   "no RANK, OMPI_COMM_WORLD_*, PMI_RANK, PMIX_RANK or Slurm step variables"};
  info.rank = {0, why};
  info.world_size = {1, why};
  info.local_rank = {0, why};
  info.local_world_size = {1, why};
  info.node_rank = {0, why};
  info.num_nodes = {1, why};
  info.master_addr = {"127.0.0.1", "loopback: single process"};
  info.master_port = {0, "any free port, chosen at init"};
  info.job_id = {"", "none: no launcher"};
  info.restart_count = {0, why};

  if (auto job = env.first({"SLURM_JOB_ID", "SLURM_JOBID"})) {
    info.job_id = *job;
    info.notes.push_back(cat("inside Slurm job ", job->value,
                             " but not in a job step (no SLURM_STEP_ID): ",
                             env.show("SLURM_PROCID"), " and ", env.show("SLURM_NTASKS"),
                             " describe the allocation, not this process; start ranks with srun"));
  }
  return out;
}

}  // namespace

LauncherEntry single_launcher() {
  LauncherEntry entry;
  entry.launcher = Launcher::single;
  entry.name = "single";
  entry.description = "no launcher (a single process)";
  entry.read = read_single;
  entry.agents = AgentForm::alone;
  return entry;
}

}  // namespace cohort::detail

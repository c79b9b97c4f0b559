// PMIx without an MPI launcher: Slurm's `srun --mpi=pmix`, which sets PMIX_RANK
// next to the usual SLURM_* step variables (and no OMPI_COMM_WORLD_*).
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"

namespace cohort::detail {

namespace {

std::string_view pmix_evidence(const EnvReader& env) {
  return env.has("PMIX_RANK") ? std::string_view("PMIX_RANK") : std::string_view();
}

Detection read_pmix(const EnvReader& env) {
  if (slurm_step_evidence(env).empty()) {
    throw LaunchEnvError(
        cat(env.show("PMIX_RANK"),
            " but neither OMPI_COMM_WORLD_* nor Slurm step variables give the world size: cohort "
            "reads PMIx jobs started by Open MPI's mpirun or by srun --mpi=pmix; launch with one "
            "of those, or unset PMIX_RANK"),
        {env.variable("PMIX_RANK"), env.variable("OMPI_COMM_WORLD_SIZE"),
         env.variable("SLURM_STEP_ID")});
  }
  Detection out = read_slurm_step(env);
  Sourced<int> rank = *env.first_int({"PMIX_RANK"});
  if (rank.value != out.info.rank.value) {
    throw LaunchEnvError(
        cat("inconsistent PMIx step: ", env.show("PMIX_RANK"), " but ",
            env.show(out.info.rank.source), "; under srun --mpi=pmix both are the task's rank"),
        {env.variable("PMIX_RANK"), env.variable(out.info.rank.source)});
  }
  out.info.rank = rank;
  out.info.launcher = {Launcher::pmix, "PMIX_RANK with Slurm step variables"};
  return out;
}

void describe_worker(Environment& env, const WorkerSeat& seat) {
  rewrite_present(env, "PMIX_RANK", cat(seat.rank));
}

}  // namespace

LauncherEntry pmix_launcher() {
  LauncherEntry entry;
  entry.launcher = Launcher::pmix;
  entry.name = "pmix";
  entry.description = "a PMIx launcher (srun --mpi=pmix)";
  entry.family = "PMIx";
  entry.also_sets = "Slurm";
  entry.evidence = pmix_evidence;
  entry.read = read_pmix;
  // srun's step, with PMIx beside it: found, placed and proven as Slurm's.
  entry.agents = AgentForm::job_step;
  entry.working_forms = srun_forms;
  entry.store_proof = StoreProof::munge;
  entry.describe_worker = describe_worker;
  entry.starts_mpi = kOpenMpi;
  return entry;
}

}  // namespace cohort::detail

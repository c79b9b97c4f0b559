// MPICH's Hydra (mpiexec.hydra, mpirun.mpich; also Intel MPI): PMI_RANK, PMI_SIZE.
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"

namespace cohort::detail {

namespace {

std::string_view mpich_evidence(const EnvReader& env) {
  for (std::string_view name : {"PMI_RANK", "PMI_SIZE"}) {
    if (env.has(name)) return name;
  }
  return {};
}

Detection read_mpich(const EnvReader& env) {
  Detection out;
  LaunchInfo& info = out.info;
  info.launcher = {Launcher::mpich, std::string(mpich_evidence(env))};
  auto rank = env.first_int({"PMI_RANK"});
  auto size = env.first_int({"PMI_SIZE"});
  if (!rank || !size) {
    throw LaunchEnvError(cat(env.show("PMI_RANK"), " and ", env.show("PMI_SIZE"),
                             ": a PMI launcher (MPICH's Hydra) sets both; unset the stray one "
                             "or launch with mpiexec"),
                         {env.variable("PMI_RANK"), env.variable("PMI_SIZE")});
  }
  info.rank = *rank;
  info.world_size = *size;
  auto local_rank = env.first_int({"MPI_LOCALRANKID"});
  auto local_size = env.first_int({"MPI_LOCALNRANKS"});
  if (local_rank && local_size) {
    info.local_rank = *local_rank;
    info.local_world_size = *local_size;
  } else if (!local_rank && !local_size && info.world_size.value == 1) {
    info.local_rank = {0, "PMI_SIZE=1"};
    info.local_world_size = {1, "PMI_SIZE=1"};
  } else {
    // Hydra always sets both; without them the node layout is unknown.
    info.local_rank = local_rank.value_or(Sourced<int>{kUnknown, "unknown: MPI_LOCALRANKID unset"});
    info.local_world_size =
        local_size.value_or(Sourced<int>{kUnknown, "unknown: MPI_LOCALNRANKS unset"});
  }
  fill_mpi_common(info, "MPICH", env.first({"PMI_JOBID"}));
  return out;
}

std::string forms(int nodes, int workers) {
  return mpirun_forms(nodes, workers, cat("mpirun -np ", nodes, " -ppn 1"));
}

void describe_worker(Environment& env, const WorkerSeat& seat) {
  rewrite_present(env, "PMI_RANK", cat(seat.rank));
  rewrite_present(env, "PMI_SIZE", cat(seat.world_size));
  rewrite_present(env, "MPI_LOCALRANKID", cat(seat.local_rank));
  rewrite_present(env, "MPI_LOCALNRANKS", cat(seat.local_world_size));
}

}  // namespace

LauncherEntry mpich_launcher() {
  LauncherEntry entry;
  entry.launcher = Launcher::mpich;
  entry.name = "mpich";
  entry.description = "MPICH's mpiexec";
  entry.family = "MPICH";
  entry.evidence = mpich_evidence;
  entry.read = read_mpich;
  entry.agents = AgentForm::mpi_job;
  entry.working_forms = forms;
  entry.describe_worker = describe_worker;
  entry.starts_mpi = kMpich;
  return entry;
}

}  // namespace cohort::detail

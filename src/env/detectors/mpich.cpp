// MPICH's Hydra (mpiexec.hydra, mpirun.mpich; also Intel MPI): PMI_RANK, PMI_SIZE.
#include "core/strings.hpp"
#include "env/detectors/detectors.hpp"

namespace cohort::detail {

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

}  // namespace cohort::detail

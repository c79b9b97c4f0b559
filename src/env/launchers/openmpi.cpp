// Open MPI's mpirun/mpiexec (ORTE in 4.x): OMPI_COMM_WORLD_*.
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"

namespace cohort::detail {
namespace {

Sourced<int> require(const EnvReader& env, std::string_view name) {
  if (auto value = env.first_int({name})) return *value;
  throw LaunchEnvError(
      cat(env.show("OMPI_COMM_WORLD_RANK"), " and ", env.show("OMPI_COMM_WORLD_SIZE"), " but ",
          name,
          " is not set: Open MPI's mpirun sets all of "
          "OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}; unset stray OMPI_COMM_WORLD_* "
          "variables or launch with mpirun"),
      {env.variable("OMPI_COMM_WORLD_RANK"), env.variable("OMPI_COMM_WORLD_SIZE"),
       env.variable(name)});
}

std::string_view openmpi_evidence(const EnvReader& env) {
  for (std::string_view name : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    if (env.has(name)) return name;
  }
  return {};
}

Detection read_openmpi(const EnvReader& env) {
  Detection out;
  LaunchInfo& info = out.info;
  info.launcher = {Launcher::openmpi, std::string(openmpi_evidence(env))};
  info.rank = require(env, "OMPI_COMM_WORLD_RANK");
  info.world_size = require(env, "OMPI_COMM_WORLD_SIZE");
  info.local_rank = require(env, "OMPI_COMM_WORLD_LOCAL_RANK");
  info.local_world_size = require(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
  // OMPI_COMM_WORLD_NODE_RANK is a node-local rank, not a node index.
  if (auto nodes = env.first_int({"OMPI_MCA_orte_num_nodes"})) info.num_nodes = *nodes;
  fill_mpi_common(info, "Open MPI", env.first({"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}));
  return out;
}

std::string forms(int nodes, int workers) {
  return mpirun_forms(nodes, workers, cat("mpirun -np ", nodes, " --map-by ppr:1:node"));
}

void describe_worker(Environment& env, const WorkerSeat& seat) {
  const std::string local_rank = cat(seat.local_rank);
  rewrite_present(env, "OMPI_COMM_WORLD_RANK", cat(seat.rank));
  rewrite_present(env, "OMPI_COMM_WORLD_SIZE", cat(seat.world_size));
  rewrite_present(env, "OMPI_COMM_WORLD_LOCAL_RANK", local_rank);
  rewrite_present(env, "OMPI_COMM_WORLD_LOCAL_SIZE", cat(seat.local_world_size));
  rewrite_present(env, "OMPI_COMM_WORLD_NODE_RANK", local_rank);  // a node-local rank
}

}  // namespace

LauncherEntry openmpi_launcher() {
  LauncherEntry entry;
  entry.launcher = Launcher::openmpi;
  entry.name = "openmpi";
  entry.description = "Open MPI's mpirun";
  entry.family = "Open MPI";
  entry.also_sets = "PMIx";
  entry.evidence = openmpi_evidence;
  entry.read = read_openmpi;
  entry.agents = AgentForm::mpi_job;
  entry.working_forms = forms;
  entry.describe_worker = describe_worker;
  entry.starts_mpi = kOpenMpi;
  return entry;
}

}  // namespace cohort::detail

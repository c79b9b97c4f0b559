#include "launch/node_plan.hpp"

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

std::string value_of(const Environment& env, const char* name) {
  auto found = env.find(name);
  return found == env.end() ? std::string() : found->second;
}

// The GPUs Slurm gave this node, if GPUs were requested at all.
std::optional<std::string> gpu_request(const Environment& env) {
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE",
                           "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK"}) {
    const std::string value = value_of(env, name);
    if (!value.empty()) return cat(name, "=", value);
  }
  return std::nullopt;
}

std::string working_forms(const LaunchInfo& outer, int nproc) {
  const int nodes = outer.num_nodes.value > 0 ? outer.num_nodes.value : 1;
  const int per_node = outer.local_world_size.value > 0 ? outer.local_world_size.value : nproc;
  return cat("The two forms that work: `srun -N", nodes, " --ntasks-per-node=1 cohort run -n ",
             per_node * nproc, " PROGRAM` (cohort starts the workers on each node), or `srun -N",
             nodes, " --ntasks-per-node=", per_node * nproc,
             " PROGRAM` (Slurm starts them; cohort programs read Slurm's variables)");
}

}  // namespace

void place_under_launcher(RunOptions& options, const LaunchInfo& outer, const Environment& env,
                          int visible_gpus) {
  if (outer.world_size.value <= 1) return;
  if (outer.launcher.value != Launcher::slurm) {
    throw InvalidArgument(
        cat("cohort run: started as rank ", outer.rank.value, " of ", outer.world_size.value,
            " by ", to_string(outer.launcher.value), " (", outer.world_size.source,
            "): every copy would start its own workers. Let ", to_string(outer.launcher.value),
            " start PROGRAM itself (cohort programs read its variables), or start one cohort run "
            "per node with --nnodes, --node-rank and --master-addr, or with --hostfile"));
  }
  const int nproc = options.nproc_per_node;
  if (outer.local_world_size.value > 1 && nproc > 1) {
    const std::string counts = value_of(env, "SLURM_STEP_TASKS_PER_NODE");
    throw InvalidArgument(
        cat("cohort run: srun started ", outer.local_world_size.value, " tasks on this node",
            counts.empty() ? "" : cat(" (SLURM_STEP_TASKS_PER_NODE=", counts, ")"),
            " and each would start -n ", nproc, " workers: ", outer.local_world_size.value * nproc,
            " workers per node, probably not what you meant. ", working_forms(outer, nproc)));
  }
  if (auto gpus = gpu_request(env); gpus && visible_gpus >= 0 && nproc > visible_gpus) {
    throw InvalidArgument(cat("cohort run: -n ", nproc, " workers but Slurm gave this node ",
                              visible_gpus, " GPU", visible_gpus == 1 ? "" : "s", " (", *gpus,
                              "): ask for as many GPUs as workers (--gpus-per-node=", nproc,
                              "), or start fewer workers. ", working_forms(outer, nproc)));
  }
  if (outer.master_addr.value.empty() || outer.master_port.value == 0) {
    throw InvalidArgument(
        cat("cohort run: task ", outer.rank.value,
            " of a Slurm step cannot "
            "find node 0: ",
            outer.master_addr.value.empty() ? outer.master_addr.source : outer.master_port.source));
  }
  options.nnodes = outer.world_size.value;
  options.node_rank = outer.rank.value;
  options.master_addr = outer.master_addr.value;
  options.rdzv_port = outer.master_port.value;
  options.master_port = 0;
  if (options.job_token.empty()) {
    options.job_token = cat("slurm:", outer.job_id.value, ":", outer.master_port.value);
  }
  const std::string nodelist = value_of(env, "SLURM_STEP_NODELIST");
  if (!nodelist.empty() && outer.local_world_size.value == 1) {
    try {
      options.node_hosts = hostlist::expand(nodelist);
    } catch (const InvalidArgument&) {  // only for messages: detection already checked it
    }
  }
}

std::optional<std::vector<std::string>> srun_for_allocation(
    const Environment& env, const std::vector<std::string>& self_argv) {
  if (value_of(env, "SLURM_JOB_ID").empty()) return std::nullopt;
  for (const char* step : {"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS"}) {
    if (!value_of(env, step).empty()) return std::nullopt;
  }
  // mpirun's ranks inside an sbatch job carry the job's variables too.
  for (const char* mpi : {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK"}) {
    if (!value_of(env, mpi).empty()) return std::nullopt;
  }
  const auto nodes = parse_int(value_of(env, "SLURM_JOB_NUM_NODES"));
  if (!nodes || *nodes < 2) return std::nullopt;
  std::vector<std::string> argv{"srun",
                                cat("--nodes=", *nodes),
                                cat("--ntasks=", *nodes),
                                "--ntasks-per-node=1",
                                "--kill-on-bad-exit=0",
                                "--unbuffered"};
  argv.insert(argv.end(), self_argv.begin(), self_argv.end());
  return argv;
}

}  // namespace cohort::detail

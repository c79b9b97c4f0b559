// What every MPI launcher's ranks derive alike once rank and sizes are read.
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"
#include "env/master_port.hpp"

namespace cohort::detail {

void fill_mpi_common(LaunchInfo& info, std::string_view launcher_name,
                     std::optional<Sourced<std::string>> job) {
  const bool one_node = info.local_world_size.value == info.world_size.value;
  if (one_node) {
    const std::string why = cat(info.local_world_size.source, " = ", info.world_size.source,
                                ": every rank is on this node");
    info.num_nodes = {1, why};
    info.node_rank = {0, why};
    info.master_addr = {"127.0.0.1", "loopback: every rank is on this node"};
  } else {
    // MPI launchers export no node index, nor rank 0's address.
    info.node_rank = {kUnknown, cat("unknown: ", launcher_name, " exports no node index")};
    if (info.num_nodes.source.empty()) {
      info.num_nodes = {kUnknown, cat("unknown: ", launcher_name, " exports no node count")};
    }
    info.master_addr = {"", cat("not in the environment: ", launcher_name,
                                " does not export rank 0's host; set MASTER_ADDR")};
  }

  if (job) {
    info.job_id = *job;
    info.master_port = {derive_port(job->value, 0),
                        cat("derived from ", job->source, "=", job->value)};
  } else {
    info.job_id = {"", cat("none: ", launcher_name, " exports no job id")};
    info.master_port = {0, cat("not in the environment: ", launcher_name,
                               " exports no job id to derive it from; set MASTER_PORT")};
  }
  info.restart_count = {0, cat("default: ", launcher_name, " does not restart ranks")};
}

std::string mpirun_forms(int nodes, int workers, std::string_view one_per_node) {
  return cat("The forms that work: `mpirun -np ", nodes * workers,
             " cohort run PROGRAM` (one worker per rank), or `", one_per_node, " cohort run -n ",
             workers, " PROGRAM` (one agent per node, starting the workers)");
}

void rewrite_present(Environment& env, std::string_view name, const std::string& value) {
  if (auto found = env.find(name); found != env.end()) found->second = value;
}

}  // namespace cohort::detail

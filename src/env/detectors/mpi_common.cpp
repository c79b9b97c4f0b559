#include "core/strings.hpp"
#include "env/detectors/detectors.hpp"

namespace cohort::detail {

void fill_mpi_nodes(LaunchInfo& info, std::string_view launcher_name) {
  if (info.local_world_size.value == info.world_size.value) {
    const std::string why = cat(info.local_world_size.source, " = ", info.world_size.source,
                                ": every rank is on this node");
    info.num_nodes = {1, why};
    info.node_rank = {0, why};
    return;
  }
  // MPI launchers export no node index; the ranks find it at init by comparing
  // host names.
  info.node_rank = {kUnknown, cat("unknown: ", launcher_name, " exports no node index")};
  if (info.num_nodes.source.empty()) {
    info.num_nodes = {kUnknown, cat("unknown: ", launcher_name, " exports no node count")};
  }
}

}  // namespace cohort::detail

// Which host each rank runs on, numbered: hosts in the order of their lowest
// rank, ranks within a host in rank order. The first rank of each host leads it.
#pragma once

#include <string>
#include <vector>

namespace cohort::detail::hier_backend {

struct HostLayout {
  std::vector<int> node_of;      ///< per rank: its host's number
  std::vector<int> local_index;  ///< per rank: its place among its host's ranks
  std::vector<int> local_size;   ///< per host: how many ranks it runs
  int nodes = 0;

  /// Whether every host runs as many ranks.
  bool uniform() const;
};

/// From every rank's host identity (BackendContext::hosts).
HostLayout lay_out(const std::vector<std::string>& hosts);

}  // namespace cohort::detail::hier_backend

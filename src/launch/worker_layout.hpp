// Where every worker of a job sits, computed alike by every agent from what
// each agent reported at the rendezvous: global ranks (contiguous per agent,
// in agent order), and the nodes. Agents that share a node share its local
// ranks: under `mpirun -np 4 cohort run` or `srun --ntasks-per-node=2 cohort
// run`, every agent runs one worker and two of them are on each node.
#pragma once

#include <string>
#include <vector>

namespace cohort::detail {

/// What one agent reported: its workers, and which node it is on. Agents
/// with equal `node` share a node (a Slurm node id, a host name, or the
/// agent itself when every agent is a node of its own).
struct AgentEntry {
  int nproc = 1;
  std::string node;
};

/// One worker's place.
struct WorkerPlace {
  int rank = 0;
  int local_rank = 0;        ///< among every worker of its node
  int local_world_size = 1;  ///< workers on its node
  int node_rank = 0;         ///< its node, numbered in order of first appearance
};

struct WorkerLayout {
  int world_size = 0;
  int num_nodes = 0;
  std::vector<int> workers_per_node;  ///< indexed by node rank
  std::vector<WorkerPlace> mine;      ///< the workers of the agent asked about
  std::vector<int> ranks_on_my_node;  ///< global ranks on that agent's node, ascending
};

/// The layout as seen from agent `self` (an index into `agents`).
WorkerLayout lay_out_workers(const std::vector<AgentEntry>& agents, int self);

}  // namespace cohort::detail

#include "launch/worker_layout.hpp"

#include <map>

namespace cohort::detail {

WorkerLayout lay_out_workers(const std::vector<AgentEntry>& agents, int self) {
  WorkerLayout layout;
  std::map<std::string, int> node_of;  // node name -> node rank
  std::vector<int> agent_node;
  std::vector<int> rank_base;
  for (const AgentEntry& agent : agents) {
    auto [it, added] = node_of.emplace(agent.node, static_cast<int>(node_of.size()));
    if (added) layout.workers_per_node.push_back(0);
    agent_node.push_back(it->second);
    rank_base.push_back(layout.world_size);
    layout.world_size += agent.nproc;
  }
  layout.num_nodes = static_cast<int>(node_of.size());
  const auto me = static_cast<std::size_t>(self);
  const int my_node = agent_node[me];
  int my_first_local = 0;  // local rank of this agent's first worker
  for (std::size_t i = 0; i < agents.size(); ++i) {
    const int node = agent_node[i];
    if (node == my_node) {
      if (i < me) my_first_local += agents[i].nproc;
      for (int k = 0; k < agents[i].nproc; ++k)
        layout.ranks_on_my_node.push_back(rank_base[i] + k);
    }
    layout.workers_per_node[static_cast<std::size_t>(node)] += agents[i].nproc;
  }
  for (int k = 0; k < agents[me].nproc; ++k) {
    WorkerPlace place;
    place.rank = rank_base[me] + k;
    place.local_rank = my_first_local + k;
    place.local_world_size = layout.workers_per_node[static_cast<std::size_t>(my_node)];
    place.node_rank = my_node;
    layout.mine.push_back(place);
  }
  return layout;
}

}  // namespace cohort::detail

// The keys the agents of one job keep under "agents/" in its store
// (node_group.hpp), shared by the node group's files.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/store.hpp>

#include "core/strings.hpp"
#include "store/exchange.hpp"

namespace cohort::detail::node_keys {

inline constexpr std::string_view kMasterPort = "agents/master_port";
inline constexpr std::string_view kCoordinatorWake = "agents/wake/c";
inline constexpr std::string_view kNextNode = "agents/next_node";
inline constexpr std::string_view kRunId = "agents/run_id";
// "1" where node 0 writes the job's timeline (--trace), else "0".
inline constexpr std::string_view kTraced = "agents/traced";
inline constexpr std::string_view kJobOver = "agents/over";  // elastic: for agents waiting to join

inline constexpr std::string_view kNodes =
    "agents/node";  // each agent's entry, exchanged at the join

inline std::string node_key(int node) {
  return exchanged_key(kNodes, node);
}
// Per attempt: the first stop, each node's end of it, every node done,
// and (written by node 0 once every node ended it) the next one's start.
inline std::string stop_key(int attempt) {
  return cat("agents/stop/", attempt);
}
inline std::string done_key(int attempt, int node) {
  return cat("agents/done/", attempt, "/", node);
}
inline std::string done_count_key(int attempt) {
  return cat("agents/done/", attempt);
}
inline std::string all_done_key(int attempt) {
  return cat("agents/all_done/", attempt);
}
inline std::string ended_key(int attempt, int node) {
  return cat("agents/ended/", attempt, "/", node);
}
inline std::string verdict_key(int attempt) {
  return cat("agents/verdict/", attempt);
}
inline std::string start_key(int attempt) {
  return cat("agents/start/", attempt);
}
// Written by whoever serves the store once it forgot the PyTorch keys of
// the attempt before `attempt` (when that is not node 0: the --hostfile
// launcher, or the agent on --rdzv-endpoint's host under srun).
inline std::string forgotten_key(int attempt) {
  return cat("agents/forgotten/", attempt);
}
// Heartbeats and wake-ups go to an agent (its id), whatever its node rank.
inline std::string heartbeat_key(int id) {
  return cat("agents/hb/", id);
}
// Each agent's timeline (cohort run --trace), for whoever writes the file.
inline std::string trace_key(int id) {
  return cat("agents/trace/", id);
}
inline std::string wake_key(int id) {
  return cat("agents/wake/", id);
}
// Adds to `batch` the wake-ups of the agents `ids`: one round trip for all.
inline StoreClient::Batch& add_wake_ups(StoreClient::Batch& batch, const std::vector<int>& ids) {
  for (int id : ids)
    batch.set(wake_key(id), "");
  return batch;
}
// Set by the store when an agent's connection ends (its last words): the
// agent is gone, whether or not its node still answers; kSomeoneGone says
// that some agent's is set, so that the coordinator reads them only then.
inline std::string gone_key(int id) {
  return cat("agents/gone/", id);
}
inline constexpr std::string_view kSomeoneGone = "agents/gone";
// Elastic rounds: the agents that registered, each one's slot, the table.
inline std::string round_count_key(int round) {
  return cat("agents/round/", round);
}
inline std::string round_slot_key(int round, std::int64_t slot) {
  return cat("agents/round/", round, "/", slot);
}
inline std::string round_table_key(int round) {
  return cat("agents/round/", round, "/table");
}
// The agents' tree formed as relays arrive (tree_arrival.hpp): how many
// arrived, and where each place's relay listens.
inline constexpr std::string_view kTreeArrivals = "agents/tree";
inline std::string tree_place_key(std::int64_t place) {
  return cat("agents/tree/", place);
}

// An agent's rendezvous entry is "nproc\thost\tpid\tnode\trelay": its
// relay's address for other nodes' relays in the agents' tree, or "".
inline std::string entry_host(const std::string& entry) {
  const std::vector<std::string> fields = split_at(entry, '\t');
  return fields.size() > 1 ? fields[1] : "";
}
inline std::string entry_relay(const std::string& entry) {
  const std::vector<std::string> fields = split_at(entry, '\t');
  return fields.size() > 4 ? fields[4] : "";
}

inline std::string seconds(std::chrono::milliseconds time) {
  return duration_text(time);
}

}  // namespace cohort::detail::node_keys

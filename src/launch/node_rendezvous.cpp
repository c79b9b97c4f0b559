// NodeGroup's rendezvous: each agent's entry exchanged, node ranks given,
// the placement of every node's ranks, and elastic membership's rounds.
#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "launch/node_group.hpp"
#include "launch/node_group_keys.hpp"

namespace cohort::detail {

using namespace node_keys;  // this part's own keys

Placement NodeGroup::join(int nproc, const std::string& host, const std::string& node,
                          const std::string& run_id) {
  const std::string mine = cat(nproc, '\t', host, '\t', getpid(), '\t', node, '\t', relay_address_);
  Placement placement;
  std::vector<std::string> entries;
  std::vector<int> ids;
  if (elastic()) {
    const RoundTable table = join_round(mine, run_id);
    options_.node_rank = table.node_rank_of(id_);
    for (const Member& member : table.members) {
      entries.push_back(member.entry);
      ids.push_back(member.id);
    }
    placement.master_port = table.master_port;
    placement.run_id = table.run_id;
    placement.traced = table.traced;
    restarts_ = table.restarts;
  } else {
    entries = exchange_entries(mine, run_id);
    for (int other = 0; other < options_.nnodes; ++other)
      ids.push_back(other);
    placement.run_id = run_id;
    placement.traced = options_.trace;
    if (options_.nnodes > 1) {  // node 0 set these before its entry: one round trip
      const std::vector<std::string> job =
          store_->multi_get({std::string(kMasterPort), std::string(kRunId), std::string(kTraced)},
                            options_.rendezvous_timeout);
      placement.master_port = static_cast<int>(parse_int(job[0]).value_or(0));
      placement.run_id = job[1];
      placement.traced = job[2] == "1";
    }
  }
  std::vector<AgentEntry> agents;
  for (const std::string& entry : entries) {
    const std::vector<std::string> fields = split_at(entry, '\t');
    AgentEntry agent;
    agent.nproc = static_cast<int>(parse_int(fields[0]).value_or(0));
    agent.node = fields.size() > 3 ? fields[3] : cat("agent ", agents.size());
    agents.push_back(agent);
    placement.hosts.push_back(entry_host(entry));
  }
  placement.layout = lay_out_workers(agents, options_.node_rank);
  placement.rank_base = placement.layout.mine.empty() ? 0 : placement.layout.mine.front().rank;
  placement.world_size = placement.layout.world_size;
  route_relay(ids, entries);
  begin_round(ids, placement.hosts);
  options_.join_watch = nullptr;  // it watched the first join only
  if (!watcher_.joinable()) {
    // From now on a call that hangs means a lost store: bound it like a heartbeat.
    store_->set_timeout(options_.heartbeat_timeout);
    if (watch_store_) watcher_ = std::thread([this] { watch(); });
  }
  return placement;
}

// Every agent's entry to every agent in O(nnodes) requests (a wait for
// every node key by every agent is nnodes² key waits: docs/rendezvous.md).
std::vector<std::string> NodeGroup::exchange_entries(const std::string& mine,
                                                     const std::string& run_id) {
  if (options_.nnodes == 1) return {mine};  // no one to meet: not four round trips to itself
  // One node picks its workers' port per attempt itself (Agent::spawn_all).
  if (options_.node_rank == 0) {
    StoreClient::Batch job;
    job.set(kRunId, run_id);
    job.set(kTraced, options_.trace ? "1" : "0");
    if (options_.torch_port < 0) job.set(kMasterPort, std::to_string(pick_free_port()));
    store_->run(job);
  }
  waiting_for(cat(node_name(options_.node_rank), " of ", options_.nnodes, " waits for the other ",
                  options_.unit, "s to reach the job's store at ", options_.store_host, ":",
                  port_));
  try {
    return exchange_values(*store_, kNodes, options_.node_rank, options_.nnodes, mine,
                           options_.rendezvous_timeout);
  } catch (const Timeout&) {
    std::vector<std::string> missing;
    for (int other = 0; other < options_.nnodes; ++other) {
      if (!store_->check({node_key(other)})) missing.push_back(node_name(other));
    }
    throw Timeout(cat("cohort run: ", missing.size(), " of ", options_.nnodes, " ", options_.unit,
                      "s did not arrive within ", seconds(options_.rendezvous_timeout), ": ",
                      detail::join(missing, ", "), ". Each should have reached the store at ",
                      options_.store_host, ":", port_,
                      ": check that cohort run was started there (same --nnodes, --master-addr, "
                      "--master-port), that it can resolve and reach that address, and its "
                      "output"));
  }
}

// Registers for the attempt under way (a round), and for each next one
// while the round closes without this agent (it came late, or MAX nodes
// run): an agent taken in by none waits until the job restarts.
RoundTable NodeGroup::join_round(const std::string& entry, const std::string& run_id) {
  waiting_for(cat("this ", options_.unit, " waits for the rendezvous of ",
                  std::max(options_.min_nodes, 1), " to ", options_.nnodes, " ", options_.unit,
                  "s at the job's store at ", options_.store_host, ":", port_));
  bool waiting = false;
  for (;;) {
    const int round = attempt_;
    RoundTable table;
    try {
      const std::int64_t slot = store_->add(round_count_key(round), 1) - 1;
      store_->set(round_slot_key(round, slot), cat(id_, '\t', entry));
      if (server_) {
        if (round == 0) run_id_ = run_id;
        (void)close_round(*store_, round);
      }
      table = await_round(round, waiting);
    } catch (const StoreError& error) {
      // An agent that waits sees the store close when the job ends,
      // between any two of its calls.
      if (!waiting) throw;
      throw JobEndedWhileWaiting(cat("cohort run: the job ended before this ", options_.unit,
                                     " was taken in (its store at ", options_.store_host, ":",
                                     port_, " closed: ", error.what(), ")"));
    }
    if (table.node_rank_of(id_) >= 0) return table;
    if (!waiting && options_.say) {
      const bool room = static_cast<int>(table.members.size()) < options_.nnodes;
      options_.say(cat("cohort run: the job runs on ", table.members.size(), " ", options_.unit,
                       "s (at most ", options_.nnodes, ") and started without this one: ",
                       room ? "waiting for it to restart and take this one in"
                            : cat("waiting to take the place of a ", options_.unit,
                                  " that is lost, at the job's next restart"),
                       "\n"));
    }
    waiting = true;
    attempt_ = round + 1;
  }
}

// Whoever serves the store (node 0, or the --hostfile launcher's heartbeat
// thread) decides who is in a round: the first waits for `min_nodes`, then
// up to last_call for more; a restart waits for the survivors of the round
// before (and takes in the agents already waiting), up to the restart bound.
RoundTable NodeGroup::close_round(Store& store, int round) {
  const bool first = round == 0;
  std::set<int> previous;
  for (int id : members())
    previous.insert(id);
  std::set<int> expected;
  for (int id : previous) {
    if (lost_ids_.count(id) == 0) expected.insert(id);
  }
  const auto bound = first ? options_.rendezvous_timeout : restart_bound_;
  const auto start = Clock::now();
  std::optional<Clock::time_point> enough_since;
  std::vector<Member> registered;
  std::set<int> present;
  for (;;) {
    const std::int64_t count = store.add(round_count_key(round), 0);
    while (static_cast<std::int64_t>(registered.size()) < count) {
      // Set right after the count by the agent that took the slot.
      const std::string text =
          store.get(round_slot_key(round, static_cast<std::int64_t>(registered.size())),
                    options_.heartbeat_timeout);
      const std::size_t tab = text.find('\t');
      const auto id = parse_int(text.substr(0, tab));
      registered.push_back({static_cast<int>(id.value_or(-1)), text.substr(tab + 1)});
      present.insert(registered.back().id);
    }
    const int n = static_cast<int>(present.size());
    const auto now = Clock::now();
    if (n >= options_.nnodes) break;
    if (n >= options_.min_nodes) {
      if (!first && std::includes(present.begin(), present.end(), expected.begin(), expected.end()))
        break;
      if (!enough_since) enough_since = now;
      if (first && now - *enough_since >= options_.last_call) break;
    }
    if (now - start >= bound) {
      if (n >= options_.min_nodes) break;  // the missing survivors are gone too
      throw Timeout(cat("cohort run: only ", n, " of at least ", options_.min_nodes, " ",
                        options_.unit, "s joined the job's store at ", options_.store_host, ":",
                        port_, " within ", seconds(bound),
                        first ? ": start cohort run on more nodes (same --nnodes, --rdzv-endpoint "
                                "or --master-addr), or lower MIN in --nnodes MIN:MAX"
                              : " after the last restart: too few nodes are left for --nnodes"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  registered.erase(std::remove_if(registered.begin(), registered.end(),
                                  [](const Member& member) { return member.id < 0; }),
                   registered.end());
  RoundTable table;
  table.members = choose_members(registered, previous, options_.nnodes);
  table.restarts = restarts_;
  table.master_port = options_.torch_port >= 0 ? server_->torch_port() : pick_free_port();
  table.run_id = run_id_;
  table.traced = options_.trace;
  store.set(round_table_key(round), table.encode());
  return table;
}

void NodeGroup::begin_round(std::vector<int> ids, std::vector<std::string> hosts) {
  {
    std::lock_guard<std::mutex> lock(members_mutex_);
    members_ = std::move(ids);
    hosts_ = std::move(hosts);
  }
  in_round_ = true;
}

// The table of `round`, once node 0 closed it. A member waits as long as
// node 0 may take to close it; an agent `waiting` to be taken in, until
// the job restarts or ends.
RoundTable NodeGroup::await_round(int round, bool waiting) {
  // Node 0 waits up to the restart bound for every node to stop, then as
  // long again for the survivors to register.
  const auto bound = round == 0 ? options_.rendezvous_timeout + options_.last_call
                                : 2 * restart_bound_ + std::chrono::seconds(5);
  const auto start = Clock::now();
  for (;;) {
    if (options_.check_interrupt) options_.check_interrupt();
    try {
      const std::string text = store_->get(round_table_key(round), std::chrono::seconds(1));
      if (auto table = RoundTable::decode(text)) return *table;
      throw Error(cat("cohort run: the job's store at ", options_.store_host, ":", port_,
                      " holds a round table cohort cannot read (another version of cohort?)"));
    } catch (const Timeout&) {
    }
    if (waiting && store_->check({std::string(kJobOver)})) {
      throw JobEndedWhileWaiting(
          cat("cohort run: the job ended before this ", options_.unit, " was taken in"));
    }
    if (!waiting && Clock::now() - start >= bound) {
      throw Timeout(cat("cohort run: ", node_name(0), " did not start attempt ", round + 1,
                        " within ",
                        seconds(std::chrono::duration_cast<std::chrono::milliseconds>(bound)),
                        " (it serves the job's store at ", options_.store_host, ":", port_,
                        "; is it still running?)"));
    }
  }
}

std::vector<int> NodeGroup::members() const {
  std::lock_guard<std::mutex> lock(members_mutex_);
  return members_;
}

int NodeGroup::round_size() const {
  std::lock_guard<std::mutex> lock(members_mutex_);
  return members_.empty() ? options_.nnodes : static_cast<int>(members_.size());
}

void NodeGroup::start_watching(const std::string& run_id) {
  run_id_ = run_id;
  {
    std::lock_guard<std::mutex> lock(members_mutex_);
    hosts_ = options_.node_hosts;
    for (int node = 0; node < options_.nnodes; ++node)
      members_.push_back(node);
  }
  in_round_ = !elastic();  // elastic: the heartbeat thread closes the first round
  store_->set_timeout(options_.heartbeat_timeout);
  watcher_ = std::thread([this] { watch(); });
}

}  // namespace cohort::detail

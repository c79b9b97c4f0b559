// NodeGroup's heartbeat thread: beats, watches the others' (heartbeats.hpp),
// and wakes the agent when the job must stop or every node is done.
#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "core/thread_name.hpp"
#include "launch/heartbeats.hpp"
#include "launch/node_group.hpp"
#include "launch/node_group_keys.hpp"

namespace cohort::detail {

using namespace node_keys;  // this part's own keys

namespace {

// Whether each of `attempt`'s `nodes` set its done key (one CHECK).
bool every_node_done(StoreClient& store, int attempt, std::size_t nodes) {
  std::vector<std::string> keys;
  keys.reserve(nodes);
  for (std::size_t node = 0; node < nodes; ++node)
    keys.push_back(done_key(attempt, static_cast<int>(node)));
  return store.check(keys);
}

}  // namespace

// The heartbeat thread. Every interval each agent adds 1 to its counter; the
// coordinator checks that every counter moves, and whether an agent's
// connection closed (gone_key, the agent's last words in the store). It
// wakes early when its wake key is set (a stop, every node done, an agent's
// connection closed).
void NodeGroup::watch() {
  name_this_thread("cohort-beats");
  // The launcher that runs no workers is the agent whose id is below 0: id_,
  // not options_.node_rank, which an elastic agent's join() changes from
  // round to round while this thread runs.
  const bool launcher = id_ < 0;
  const bool coordinator = server_ != nullptr || launcher;
  const std::string wake = coordinator ? std::string(kCoordinatorWake) : wake_key(id_);
  HeartbeatWatch beats(options_.heartbeat_timeout);  // by node rank in the attempt
  std::vector<int> ids;
  std::vector<std::string> hosts;
  bool stop_seen = false;
  int seen_attempt = -1;
  bool seen_in_round = false;
  bool done_and_gone = false;  // a node that said it was done went
  try {
    while (!quit_) {
      try {
        watch_store_->wait({wake}, options_.heartbeat_interval);
        watch_store_->delete_key(wake);
      } catch (const Timeout&) {
      }
      if (quit_) return;
      if (id_ >= 0) {
        try {
          watch_store_->add(heartbeat_key(id_), 1);
        } catch (const StoreError&) {
          // Out when this node's relay lost its parent in the agents' tree,
          // it may not have counted: one beat missed. A store really lost
          // fails the wait above at the next tick.
          if (!relay_) throw;
        }
      }
      if (elastic() && launcher && server_ && !in_round_) {
        // The --hostfile launcher's part.
        const RoundTable table = close_round(*watch_store_, attempt_);
        std::vector<int> round_ids;
        std::vector<std::string> round_hosts;
        for (const Member& member : table.members) {
          round_ids.push_back(member.id);
          round_hosts.push_back(entry_host(member.entry));
        }
        begin_round(std::move(round_ids), std::move(round_hosts));
      }
      const int attempt = attempt_;
      const bool in_round = in_round_;
      if (attempt != seen_attempt || in_round != seen_in_round) {
        // A restart: the nodes were busy stopping and starting, not lost.
        if (attempt != seen_attempt) stop_seen = done_and_gone = false;
        seen_attempt = attempt;
        seen_in_round = in_round;
        {
          std::lock_guard<std::mutex> lock(members_mutex_);
          ids = members_;
          hosts = hosts_;
        }
        // The --hostfile launcher waits for each node to join, unless it
        // closed the round itself (elastic).
        beats.begin(ids.size(), Clock::now(), !launcher || elastic());
        std::lock_guard<std::mutex> lock(members_mutex_);
        stalled_.clear();
      }
      if (!stop_seen && watch_store_->check({stop_key(attempt)})) {
        stop_seen = true;
        notify();
        const bool restart_left = may_restart();  // before attempt_: see heartbeats_end
        if (heartbeats_end(coordinator, restart_left, attempt_, attempt)) return;
      }
      const bool waits_for_all = coordinator || options_.max_restarts > 0 || elastic();
      if (waits_for_all && !all_done_ && watch_store_->check({all_done_key(attempt)})) {
        all_done_ = true;
        notify();
        return;
      }
      if (!coordinator || !in_round) continue;
      if (!stop_seen && elastic() && static_cast<int>(ids.size()) < options_.nnodes &&
          watch_store_->add(round_count_key(attempt + 1), 0) > 0 &&
          watch_store_->add(done_count_key(attempt), 0) == 0) {
        // An agent registered for the next round while this one runs: it
        // came late, or replaces a lost node. Restart to take it in.
        const std::string slot = watch_store_->get(round_slot_key(attempt + 1, 0));  // "id\tentry"
        StopRecord join;
        join.membership = true;
        join.host = entry_host(slot.substr(slot.find('\t') + 1));
        join.summary =
            cat("a ", options_.unit, " on ", join.host, " is waiting to join (", ids.size(),
                " of at most ", options_.nnodes, " ", options_.unit, "s run)");
        watch_store_->compare_set(stop_key(attempt), "", join.encode());
        StoreClient::Batch wake_ups;
        watch_store_->run(add_wake_ups(wake_ups, ids));
        stop_seen = true;
        notify();
        continue;
      }
      // A node's finished() whose ADD was lost with a relay on its way (it
      // may have counted or not; its SET went up again) is counted by no
      // one: once a done node went, the done keys say when all are.
      if (done_and_gone && every_node_done(*watch_store_, attempt, ids.size())) {
        announce_all_done(*watch_store_, attempt);
        continue;
      }
      const auto now = Clock::now();
      // One request a tick, not one per node: whether any agent's
      // connection closed since the last look.
      const bool someone_gone = watch_store_->delete_key(kSomeoneGone);
      for (std::size_t node = 0; node < ids.size(); ++node) {
        if (ids[node] == id_) continue;
        if (!beats.arrived(node)) {  // the --hostfile launcher waits for each node to join
          if (watch_store_->check({node_key(static_cast<int>(node))})) beats.arrive(node, now);
          continue;
        }
        const bool gone = someone_gone && watch_store_->check({gone_key(ids[node])});
        if (!gone && !beats.stalled(node, watch_store_->add(heartbeat_key(ids[node]), 0), now)) {
          continue;
        }
        if (watch_store_->check({done_key(attempt, static_cast<int>(node))})) {
          done_and_gone = true;
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(members_mutex_);
          stalled_.insert(ids[node]);  // settle() leaves it out
        }
        if (stop_seen) continue;
        StopRecord lost;
        lost.node = static_cast<int>(node);
        lost.node_lost = true;
        lost.host = node < hosts.size() ? hosts[node] : "";
        lost.summary =
            gone ? cat(node_name(static_cast<int>(node)),
                       " stopped answering: its cohort run's connection to the job's store "
                       "closed (the agent was killed, or ended on an error of its own)")
                 : cat(node_name(static_cast<int>(node)),
                       " stopped answering: no heartbeat from its cohort run for ",
                       seconds(options_.heartbeat_timeout),
                       " (the node went down, or its network is cut)");
        watch_store_->compare_set(stop_key(attempt), "", lost.encode());
        StoreClient::Batch wake_ups;
        watch_store_->run(add_wake_ups(wake_ups, ids));
        stop_seen = true;
        notify();
      }
    }
  } catch (const Error& error) {
    // The end cut this thread's call short (~NodeGroup): no lost store, or
    // the end would hand this node's relay's children nothing over.
    if (quit_) return;
    // This agent lost the store (node 0 gone, network cut): stop_record()
    // reports it, and the job stops here.
    {
      std::lock_guard<std::mutex> lock(lost_mutex_);
      lost_ = error.what();
    }
    notify();
  }
}

}  // namespace cohort::detail

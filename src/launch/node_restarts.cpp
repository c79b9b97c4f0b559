// NodeGroup between two attempts: every node's workers gone before any of
// the next start; elastic membership's verdict, decided where the store is.
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

std::chrono::milliseconds NodeGroup::restart_bound(std::chrono::milliseconds grace) const {
  return grace + 2 * options_.heartbeat_timeout + std::chrono::seconds(5);
}

// Waits for every node's end of the attempt under way, naming those that
// did not end it within `bound`.
void NodeGroup::await_every_node_ended(std::chrono::milliseconds bound) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(options_.nnodes));
  for (int node = 0; node < options_.nnodes; ++node)
    keys.push_back(ended_key(attempt_, node));
  try {
    store_->wait(keys, bound);
  } catch (const Timeout&) {
    std::vector<std::string> missing;
    for (int node = 0; node < options_.nnodes; ++node) {
      if (!store_->check({ended_key(attempt_, node)})) missing.push_back(node_name(node));
    }
    throw Timeout(cat("cohort run: cannot restart the job: ", detail::join(missing, ", "),
                      " did not stop its workers of attempt ", attempt_ + 1, " within ",
                      seconds(bound)));
  }
}

int NodeGroup::begin_next_attempt(const StopRecord& stop, std::chrono::milliseconds grace) {
  const auto bound = restart_bound(grace);
  const int next = attempt_ + 1;
  if (options_.node_rank >= 0) store_->set(ended_key(attempt_, options_.node_rank), "");
  // Every node's workers of this attempt are gone before any of the next
  // starts: then no rank of the old attempt meets one of the new, and the
  // PyTorch keys the old ones set are forgotten before a new one sets any.
  // Whoever serves the store forgets them; node 0 starts the next attempt.
  if (server_ && options_.node_rank != 0) {
    await_every_node_ended(bound);
    forget_torch_keys();
    store_->set(forgotten_key(next), "");
  }
  if (options_.node_rank == 0) {
    await_every_node_ended(bound);
    if (server_) {
      forget_torch_keys();
    } else {
      try {
        (void)store_->get(forgotten_key(next), bound);
      } catch (const Timeout&) {
        throw Timeout(cat("cohort run: cannot restart the job: the process serving its store at ",
                          options_.store_host, ":", port_, " did not follow into attempt ",
                          next + 1, " within ", seconds(bound), " (is it stopping?)"));
      }
    }
    // A MASTER_PORT free now on node 0, for workers whose rank 0 listens.
    store_->set(start_key(next), std::to_string(pick_free_port()));
  }
  int port = 0;
  try {
    port = static_cast<int>(parse_int(store_->get(start_key(next), bound)).value_or(0));
  } catch (const Timeout&) {
    throw Timeout(cat("cohort run: cannot restart the job: ", node_name(0),
                      " did not start attempt ", next + 1, " within ", seconds(bound),
                      " (a node did not stop its workers in time, or node 0 is gone)"));
  }
  // The attempt first, then the budget: the heartbeat thread that finds no
  // restart left also finds the new attempt, and keeps beating (watch()).
  attempt_ = next;
  if (stop.rank >= 0) ++restarts_;
  return port;
}

NodeGroup::Verdict NodeGroup::settle(const StopRecord& stop, std::chrono::milliseconds grace) {
  const auto bound = restart_bound(grace);
  restart_bound_ = bound;
  const int attempt = attempt_;
  const std::vector<int> ids = members();
  if (options_.node_rank >= 0) store_->set(ended_key(attempt, options_.node_rank), "");
  Verdict verdict;
  if (server_) {
    // Every node's workers of this attempt are gone (or the node is) before
    // any of the next starts: then no rank of the old attempt meets one of the new.
    std::set<int> lost;  // node ranks
    if (stop.node_lost && stop.node >= 0) lost.insert(stop.node);
    const auto start = Clock::now();
    for (;;) {
      std::set<int> stalled;
      {
        std::lock_guard<std::mutex> lock(members_mutex_);
        stalled = stalled_;
      }
      const bool late = Clock::now() - start >= bound;
      bool waiting = false;
      for (std::size_t node = 0; node < ids.size(); ++node) {
        const int rank = static_cast<int>(node);
        if (lost.count(rank) != 0 || store_->check({ended_key(attempt, rank)})) continue;
        if (late || stalled.count(ids[node]) != 0) {
          lost.insert(rank);
        } else {
          waiting = true;
        }
      }
      if (!waiting) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    verdict.stop = stop;
    if (lost.empty()) {
      verdict.restart = restartable(stop);
    } else {
      if (!stop.node_lost) {
        const int node = *lost.begin();
        StopRecord gone;
        gone.node = node;
        gone.node_lost = true;
        {
          std::lock_guard<std::mutex> lock(members_mutex_);
          gone.host = static_cast<std::size_t>(node) < hosts_.size() ? hosts_[node] : "";
        }
        const bool closed = store_->check({gone_key(ids[static_cast<std::size_t>(node)])});
        gone.summary =
            closed
                ? cat(node_name(node),
                      " was lost (its cohort run's connection to the job's store closed); "
                      "before that was noticed: ",
                      stop.summary)
                : cat(node_name(node), " was lost (no heartbeat for ",
                      seconds(options_.heartbeat_timeout), ", or its workers did not stop within ",
                      seconds(bound), "); before that was noticed: ", stop.summary);
        verdict.stop = gone;
      }
      verdict.restart =
          elastic() && static_cast<int>(ids.size() - lost.size()) >= options_.min_nodes;
      for (int node : lost)
        lost_ids_.insert(ids[static_cast<std::size_t>(node)]);
    }
    if (verdict.restart) forget_torch_keys();
    store_->set(verdict_key(attempt), cat(verdict.restart ? 1 : 0, '\t', verdict.stop.encode()));
  } else {
    std::string text;
    try {
      text = store_->get(verdict_key(attempt), 2 * bound + std::chrono::seconds(5));
    } catch (const Timeout&) {
      throw Timeout(cat("cohort run: ", node_name(0), " did not decide how attempt ", attempt + 1,
                        " ended within ", seconds(2 * bound + std::chrono::seconds(5)),
                        " (it serves the job's store at ", options_.store_host, ":", port_,
                        "; is it still running?)"));
    }
    const std::size_t tab = text.find('\t');
    auto decided = StopRecord::decode(tab == std::string::npos ? "" : text.substr(tab + 1));
    if (!decided) {
      throw Error(cat("cohort run: cannot read node 0's verdict on attempt ", attempt + 1,
                      " in the job's store at ", options_.store_host, ":", port_));
    }
    verdict.stop = *decided;
    verdict.restart = text.rfind("1\t", 0) == 0;
  }
  if (verdict.restart) {
    attempt_ = attempt + 1;  // the round's table (join) starts it; before the budget, as above
    if (verdict.stop.rank >= 0) ++restarts_;
    in_round_ = false;  // the --hostfile launcher's thread closes that round
  }
  return verdict;
}

}  // namespace cohort::detail

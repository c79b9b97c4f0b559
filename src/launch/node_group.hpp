// The agents of one job, one per node, and what they tell each other through
// the job's store: who arrived (rendezvous), where each node's ranks start,
// that the job must stop (first failure anywhere wins), that a node is gone
// (heartbeats), and that everyone is done.
//
// Keys live under "agents/" in the store, apart from the workers' own
// ("attempt_<k>/..."). The store is served by node 0's agent or, for
// `cohort run --hostfile`, by the launcher that started the agents over ssh
// (the "coordinator" is whoever serves it: it watches the heartbeats).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <cohort/store.hpp>

#include "core/fd.hpp"

namespace cohort::detail {

struct NodeGroupOptions {
  int nnodes = 1;
  /// This agent's node rank; -1 for a coordinator that runs no workers.
  int node_rank = 0;
  /// Where the store is reached (and, when this process serves it, bound:
  /// every interface for several nodes, loopback for one).
  std::string store_host = "127.0.0.1";
  int store_port = 0;  ///< 0: any free port (only when this process serves it)
  bool serve_store = true;
  std::string token;
  std::chrono::milliseconds rendezvous_timeout{300000};
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  /// The host expected at each node rank, for messages; may be empty.
  std::vector<std::string> node_hosts;
};

/// Where this node's workers sit in the job, agreed at rendezvous.
struct Placement {
  int rank_base = 0;               ///< global rank of local worker 0
  int world_size = 1;              ///< workers in the whole job
  int master_port = 0;             ///< several nodes: every worker's MASTER_PORT, picked by node 0
  std::vector<std::string> hosts;  ///< the host of each node rank, as each reported it
};

/// Why the job stops, as the first agent to know wrote it. Encoded in the
/// store as tab-separated fields.
struct StopRecord {
  int node = -1;  ///< node rank where it happened; -1 for the coordinator
  std::string host;
  int rank = -1;           ///< the failed worker's global rank, -1 when no worker failed
  int exit_code = 1;       ///< what every agent exits with
  bool node_lost = false;  ///< `node` itself is gone (no heartbeat): nobody waits for it
  std::string summary;     ///< one line: "rank 5 failed: exit code 3"

  std::string encode() const;
  static std::optional<StopRecord> decode(const std::string& text);
};

class NodeGroup {
 public:
  /// Serves the store or connects to it (retrying until the rendezvous
  /// timeout). Throws cohort::Error naming host:port and what to check.
  explicit NodeGroup(NodeGroupOptions options);
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  /// Waits until every node rank reported (`nproc` workers on `host`), then
  /// starts the heartbeats. Throws cohort::Timeout naming the node ranks (and
  /// hosts) that never arrived and the address they should have reached.
  Placement join(int nproc, const std::string& host);

  /// For a coordinator with no node rank (the --hostfile launcher): starts
  /// watching the heartbeats of the nodes as they arrive.
  void start_watching();

  /// Readable (eventfd) when the job must stop because of another node, or,
  /// for the coordinator, when every node is done. Then call stop_record().
  int event_fd() const noexcept { return event_.get(); }
  /// Why the job stops, once it must; nullopt while it goes on.
  std::optional<StopRecord> stop_record();
  /// Whether every node reported finished().
  bool all_done();

  /// Records that the job must stop; the first record anyone wrote wins and
  /// is returned. Wakes every agent.
  StopRecord declare_stop(const StopRecord& record);

  /// This node's workers are all gone. A coordinator then keeps serving the
  /// store until every node is done (or `linger` passed): others may still
  /// read from it.
  void finished();
  void linger(std::chrono::milliseconds at_most);

  /// For the workers: how they reach the store.
  const std::string& store_host() const noexcept { return options_.store_host; }
  int store_port() const noexcept { return port_; }
  const std::string& token() const noexcept { return options_.token; }
  bool serves_store() const noexcept { return server_ != nullptr; }
  const NodeGroupOptions& options() const noexcept { return options_; }

 private:
  std::string node_name(int node) const;  // "node 2 (n3)"
  void wake_everyone();
  void watch();  // the heartbeat thread
  void notify() noexcept;
  StopRecord lost_store(const std::string& why) const;
  bool store_lost();

  NodeGroupOptions options_;
  std::unique_ptr<StoreServer> server_;
  std::shared_ptr<Store> store_;        // the main thread's connection
  std::shared_ptr<Store> watch_store_;  // the heartbeat thread's own
  int port_ = 0;
  Fd event_;
  std::thread watcher_;
  std::atomic<bool> quit_{false};
  std::atomic<bool> all_done_{false};
  std::vector<std::string> hosts_;
  StoreClient::Options client_;
  std::mutex lost_mutex_;
  std::string lost_;  ///< why the heartbeat thread lost the store, "" while it has it
};

}  // namespace cohort::detail

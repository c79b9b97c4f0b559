// The agents of one job, one per node, and what they tell each other through
// the job's store: who arrived (rendezvous), where each node's ranks start,
// that the job must stop (first failure anywhere wins), that a node is gone
// (at once when its agent's connection to the store closes, by heartbeat
// when its network is cut), and that everyone is done.
//
// Keys live under "agents/" in the store, apart from the workers' own
// ("attempt_<k>/..."). The store is served by node 0's agent or, for
// `cohort run --hostfile`, by the launcher that started the agents over ssh
// (the "coordinator" is whoever serves it: it watches the heartbeats).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/fd.hpp"
#include "launch/agent_tree.hpp"
#include "launch/join_watch.hpp"
#include "launch/membership.hpp"
#include "launch/stop_record.hpp"
#include "launch/worker_layout.hpp"

namespace cohort::detail {

/// Where a store is reached.
struct StoreAddress {
  std::string host;
  int port = 0;
  std::string token;  ///< the job token, when it travels with the address
};

/// Node rank of an agent that learns it at the rendezvous (torchrun's c10d
/// form): the agent that serves the store is 0, the others follow in the
/// order they arrive.
inline constexpr int kNodeRankAtJoin = -2;

struct NodeGroupOptions {
  /// Agents in the job ("nodes"; one per task under `mpirun ... cohort run`).
  int nnodes = 1;
  /// This agent's node rank; -1 for a coordinator that runs no workers;
  /// kNodeRankAtJoin to be given one.
  int node_rank = 0;
  /// Where the store is reached.
  std::string store_host = "127.0.0.1";
  int store_port = 0;  ///< 0: any free port (only when this process serves it)
  bool serve_store = true;
  /// Serve the store if its address can be bound here, else connect to it
  /// (torchrun's c10d form: the agent on the endpoint's host serves).
  bool serve_if_bindable = false;
  /// Where a store this process serves listens: "0.0.0.0", or one address.
  std::string bind_host = "127.0.0.1";
  /// Also serve PyTorch's TCPStore protocol (the workers' MASTER_PORT under
  /// TORCHELASTIC_USE_AGENT_STORE=True): -1 no, 0 a free port, else this port,
  /// on `torch_host` ("": bind_host).
  int torch_port = -1;
  std::string torch_host;
  /// Told (on the store's thread) when that port meets a PyTorch client it
  /// cannot serve (StoreServer::Options::on_unservable).
  std::function<void(const std::string&)> on_unservable;
  /// On a node whose agent does not serve the store: this agent reaches the
  /// store through a relay of its own (StoreServer::Options::relay_to),
  /// which its workers use too, and which, in a job of more than
  /// `tree_width` nodes, other nodes' relays connect to (agent_tree.hpp):
  /// docs/rendezvous.md.
  bool relay = false;
  int tree_width = kDefaultTreeWidth;
  /// The node rank whose agent serves the store (-1: the launcher does),
  /// where that is known before the rendezvous. With `node_hosts` for every
  /// node, a known `node_rank` and `store_port`, and a job that is not
  /// elastic, the agents' tree then forms before the rendezvous: each relay
  /// listens on the job's port at its own host's address and connects to
  /// its parent's there (docs/rendezvous.md, "The agents' tree"). Without
  /// the hosts, each relay takes the place of its node rank as it arrives
  /// (tree_arrival.hpp), and where node ranks are not known either, the
  /// next place by arrival: the constructor returns once it is placed.
  std::optional<int> store_node;
  /// The relay's TCPStore port for Python's workers, on 127.0.0.1: -1 none,
  /// 0 a free one.
  int relay_torch_port = -1;
  /// Under mpirun, no address is known in advance: the agent that serves
  /// passes its own and the token it made, and every agent gets the
  /// server's (one collective call through the launcher's key-value service).
  std::function<StoreAddress(const StoreAddress& mine)> exchange;
  /// What one agent is called in messages: "node", or "task" when several
  /// agents share a node.
  std::string unit = "node";
  /// The job token, and how peers on other hosts prove they belong to the
  /// job (StoreServer::Options): the token is a secret, or MUNGE (Slurm).
  /// Without either, only this user's processes on the serving host get in.
  std::string token;
  bool token_is_secret = false;
  bool munge = false;
  /// The file `token` was read from when it is the per-user secret
  /// (launch/user_secret.hpp), for the message when the store refuses it.
  std::string token_source;
  /// cohort run --trace here. Where this agent serves the store (or is node
  /// 0 of a static job), it asks every agent for its events: Placement::traced.
  bool trace = false;
  std::chrono::milliseconds rendezvous_timeout{300000};
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  /// The host expected at each node rank, for messages; may be empty.
  std::vector<std::string> node_hosts;
  /// The job's restart budget (--max-restarts, for the whole job): while
  /// some is left, every agent waits for the others at the end of an
  /// attempt (a later failure elsewhere restarts its workers too).
  int max_restarts = 0;
  /// Elastic membership (--nnodes MIN:MAX): `nnodes` is MAX, and the job
  /// goes on with as few as `min_nodes` (0: exactly `nnodes`). Every restart
  /// is a new round of the rendezvous (launch/membership.hpp).
  int min_nodes = 0;
  /// With elastic membership: how long the first round waits for more
  /// nodes once `min_nodes` joined (torchrun's last_call_timeout).
  std::chrono::milliseconds last_call{10000};
  /// Told, once, that this agent joined after its round closed and waits
  /// to be taken in at the job's next restart.
  std::function<void(const std::string&)> say;
  /// Called about once a second while this agent waits to be taken in;
  /// throws to stop waiting (a stop signal arrived).
  std::function<void()> check_interrupt;
  /// While the agent joins (this group's making and its first join()):
  /// its connections to the store, ended by a stop signal, and what the
  /// join waits for, said when it takes long. May be null.
  JoinWatch* join_watch = nullptr;
};

/// An agent that waited to be taken in (elastic membership) learnt that
/// the job ended first.
class JobEndedWhileWaiting : public Error {
 public:
  using Error::Error;
};

/// Where this node's workers sit in the job, agreed at rendezvous.
struct Placement {
  int rank_base = 0;               ///< global rank of local worker 0
  int world_size = 1;              ///< workers in the whole job
  int master_port = 0;             ///< several nodes: every worker's MASTER_PORT, picked by node 0
  std::string run_id;              ///< the job's run id, node 0's
  std::vector<std::string> hosts;  ///< the host of each node rank, as each reported it
  WorkerLayout layout;             ///< local ranks, nodes
  /// Whoever writes the job's timeline (cohort run --trace where the store
  /// is served) gathers every agent's events: each records and publishes
  /// its own, whether or not it was given --trace itself.
  bool traced = false;
};

class NodeGroup {
 public:
  /// Serves the store or connects to it (retrying until the rendezvous
  /// timeout). Throws cohort::Error naming host:port and what to check.
  explicit NodeGroup(NodeGroupOptions options);
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  /// Waits until every node rank reported (`nproc` workers on `host`, on the
  /// node called `node`: agents that name the same node share its local
  /// ranks), then starts the heartbeats. Node 0's `run_id` becomes the job's.
  /// Throws cohort::Timeout naming the node ranks (and hosts) that never
  /// arrived and the address they should have reached.
  Placement join(int nproc, const std::string& host, const std::string& node,
                 const std::string& run_id);

  /// For a coordinator with no node rank (the --hostfile launcher): starts
  /// watching the heartbeats of the nodes as they arrive. With elastic
  /// membership its heartbeat thread also closes every round (the job's
  /// run id is `run_id`).
  void start_watching(const std::string& run_id);

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

  /// This node's workers of this attempt are all gone (once per attempt).
  /// A coordinator then keeps serving the store until every node is done
  /// (or `linger` passed): others may still read from it.
  void finished();

  /// Whether the job restarts after `record`, this attempt's first stop:
  /// a worker failed (not a signal or the timeout) and the job-wide budget
  /// has a restart left; or, with elastic membership, a node was lost and at
  /// least `min_nodes` remain, or a node waits to join (neither uses the
  /// budget). The same answer on every node.
  bool restartable(const StopRecord& record) const;
  /// Where this process serves the store: forgets what the workers' PyTorch
  /// clients set there (StoreServer::forget_torch_keys), so that the next
  /// attempt's start afresh. begin_next_attempt() and settle() do it where
  /// the store is served once every node's workers are gone, before the
  /// next attempt starts; one node calls it itself.
  void forget_torch_keys();
  /// Whether a stop of this attempt may still restart the job (restarts
  /// left, or elastic membership): then every agent waits for the others at
  /// the end of it.
  bool may_restart() const noexcept;
  /// The job's restart rules (stop_record.hpp).
  RestartBudget budget() const noexcept;
  /// Without elastic membership, after this node's workers of the
  /// restartable attempt that `stop` ended are gone: waits until every
  /// node's are (node 0 checks, within `grace` + 2 heartbeat timeouts + 5 s:
  /// time for every agent to stop its workers), then moves to the next
  /// attempt, whose stop and done keys are its own. Returns a MASTER_PORT
  /// free on node 0 for its workers. A coordinator without workers (the
  /// --hostfile launcher) follows along. Throws cohort::Timeout naming the
  /// nodes that did not stop in time.
  int begin_next_attempt(const StopRecord& stop, std::chrono::milliseconds grace);

  /// How an attempt of an elastic job ended, decided by whoever serves the
  /// store for every node alike.
  struct Verdict {
    StopRecord stop;       ///< what ended it (a lost node outranks the failures it caused)
    bool restart = false;  ///< then join() gives the next round's placement
  };
  /// With elastic membership, after this node's workers of the attempt that
  /// `stop` (its first stop) ended are gone, or for the --hostfile launcher
  /// once it heard of the stop: whoever serves the store waits until every
  /// node's workers are gone or the node is lost (no heartbeat for the
  /// heartbeat timeout, or not stopped within `grace` + 2 heartbeat timeouts
  /// + 5 s), then decides. A lost node decides the attempt even when a worker
  /// failed first (its peers' connections to it broke): the job goes on if
  /// at least `min_nodes` remain, with no restart budget used; else the
  /// budget decides (restartable()). Throws cohort::Timeout when the
  /// verdict does not come (the node serving the store is gone).
  Verdict settle(const StopRecord& stop, std::chrono::milliseconds grace);
  /// Whether this node lost the job's store (its heartbeat's connection
  /// failed: node 0 gone, the network cut): no verdict, restart or round
  /// can reach it, and every request would wait its timeout in vain.
  bool store_lost();
  /// The attempt under way, 0 first (TORCHELASTIC_RESTART_COUNT).
  int attempt() const noexcept { return attempt_; }
  /// Restarts for failures so far (the --max-restarts budget's use).
  int restarts() const noexcept { return restarts_; }
  /// Whether the job has elastic membership (--nnodes MIN:MAX).
  bool elastic() const noexcept {
    return options_.min_nodes > 0 && options_.min_nodes < options_.nnodes;
  }
  /// The nodes of the attempt under way.
  int round_size() const;
  /// Their agents' ids (member_id()), by node rank.
  std::vector<int> members() const;
  void linger(std::chrono::milliseconds at_most);
  /// Whoever serves the store, once every node is done: waits, up to
  /// `at_most`, until every other member's agent has closed its connection,
  /// so that none finds the store gone before it has read that the job is
  /// done (it would report the job's store lost). Whether all left in time;
  /// true at once where this agent serves no store.
  bool see_off(std::chrono::milliseconds at_most);

  /// cohort run --trace: this agent's events (timeline.hpp), for whoever
  /// writes the file.
  void publish_trace(const std::string& events);
  /// The same for an agent of one node whose launcher serves another store
  /// (`--hosts` with one host): there, as agent `id`.
  static void publish_trace_to(const StoreAddress& store, int id, const std::string& events);
  /// The events that the agents `ids` published, as each arrives within
  /// `at_most`. An agent that publishes does so before its connection
  /// closes, so one whose connection closed without them (killed) is not
  /// waited for. Each agent whose events never came has a track that says
  /// why instead (missing_node_events, timeline.hpp).
  std::vector<std::string> gather_traces(const std::vector<int>& ids,
                                         std::chrono::milliseconds at_most);

  /// This agent's node rank (assigned by now under kNodeRankAtJoin; with
  /// elastic membership, its place in the attempt under way).
  int node_rank() const noexcept { return options_.node_rank; }
  /// This agent's id for the whole job: its first node rank.
  int member_id() const noexcept { return id_; }
  /// For the workers: how they reach the store.
  const std::string& store_host() const noexcept { return options_.store_host; }
  int store_port() const noexcept { return port_; }
  /// The TCPStore-protocol port this process serves, or -1.
  int torch_port() const noexcept;
  const std::string& token() const noexcept { return options_.token; }
  /// Whether clients on other hosts prove themselves with MUNGE.
  bool munge() const noexcept { return options_.munge; }
  bool serves_store() const noexcept { return server_ != nullptr; }
  /// The store this agent serves, or nullptr.
  StoreServer* server() const noexcept { return server_.get(); }
  /// This node's relay of the store (options().relay), or nullptr.
  StoreServer* relay() const noexcept { return relay_.get(); }
  /// Where it listens for other nodes' relays ("host:port"), "" where none.
  const std::string& relay_address() const noexcept { return relay_address_; }
  const NodeGroupOptions& options() const noexcept { return options_; }

 private:
  std::string node_name(int node) const;  // "node 2 (n3)"
  std::string member_host(int id) const;  // as it reported it; "" when unknown
  std::vector<std::string> exchange_entries(const std::string& mine, const std::string& run_id);
  RoundTable join_round(const std::string& entry, const std::string& run_id);

  RoundTable await_round(int round, bool waiting);
  RoundTable close_round(Store& store, int round);  // publishes and returns it
  void begin_round(std::vector<int> ids, std::vector<std::string> hosts);
  // How long node 0 waits for every node to stop its workers.
  std::chrono::milliseconds restart_bound(std::chrono::milliseconds grace) const;
  void await_every_node_ended(std::chrono::milliseconds bound);
  bool start_server(bool required);
  void start_relay();
  // Where the agents' tree is known before the rendezvous (store_node): the
  // address this node's relay listens at, and its parent's relay, if any.
  struct TreeAhead {
    std::string address;
    std::optional<StoreServer::Hop> parent;
  };
  std::optional<TreeAhead> tree_ahead() const;
  // Moves the relay under its parent in the round of `ids` and their entries.
  void route_relay(const std::vector<int>& ids, const std::vector<std::string>& entries);
  void arrive_in_tree();
  // Runs `reach`, the first calls to the store, saying what to check when
  // they fail.
  void reach_store(const std::function<void()>& reach);
  void await_server_or_serve();
  StoreClient::Options client_options() const;
  // A connection to the job's store: in this process when it serves it.
  std::shared_ptr<StoreClient> connect(const StoreClient::Options& client) const;
  // Connects a turn at a time until `deadline`; `between`, called after each
  // turn in which no one answered, ends the tries (nullptr) by returning true.
  std::shared_ptr<StoreClient> connect_in_turns(StoreClient::Options client,
                                                std::chrono::steady_clock::time_point deadline,
                                                std::chrono::milliseconds turn,
                                                const std::function<bool()>& between) const;
  // Tells the join's watch what it waits for now (JoinWatch::waiting_for).
  void waiting_for(std::string what) const;
  Timeout unreachable_store(const Error& error) const;
  void take_node_rank();
  void wake_everyone();
  void watch();  // the heartbeat thread
  // Every node of `attempt` is done: says so, and wakes who waits for it.
  void announce_all_done(StoreClient& store, int attempt);
  void notify() noexcept;
  StopRecord lost_store(const std::string& why) const;

  NodeGroupOptions options_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreServer> relay_;  // outlives the connections through it
  std::string relay_address_;
  // Where the tree is not known ahead, each relay takes its place as it
  // arrives (tree_arrival.hpp): by its node rank, or by arrival where this is 0.
  bool tree_on_arrival_ = false;
  std::size_t tree_place_by_rank_ = 0;
  std::string relay_name_;                    // what a relay placed on arrival answers to
  std::shared_ptr<StoreClient> store_;        // the main thread's connection
  std::shared_ptr<StoreClient> watch_store_;  // the heartbeat thread's own
  int port_ = 0;
  Fd event_;
  std::thread watcher_;
  std::atomic<bool> quit_{false};
  std::atomic<bool> all_done_{false};
  std::atomic<int> attempt_{0};
  int finished_ = -1;  // the attempt this node last said finished() for
  int id_ = -1;        // this agent's id for its whole life: its first node rank
  std::atomic<int> restarts_{0};
  std::atomic<bool> in_round_{false};  // an attempt runs (not between rounds)
  std::set<int> lost_ids_;             // node 0, elastic: agents left out for good
  std::string run_id_;
  std::chrono::milliseconds restart_bound_{0};  // how long node 0 waits for every node to stop
  std::set<int> stalled_;  // ids whose heartbeat stopped in this attempt (members_mutex_)
  mutable std::mutex members_mutex_;  // the heartbeat thread reads these two
  std::vector<int> members_;          // the attempt's agents' ids, by node rank
  std::vector<std::string> hosts_;
  std::mutex lost_mutex_;
  std::string lost_;  ///< why the heartbeat thread lost the store, "" while it has it
};

}  // namespace cohort::detail

#include "launch/node_group.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/log.hpp"
#include "core/net_interfaces.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
#include "launch/node_group_keys.hpp"
#include "launch/timeline.hpp"
#include "launch/tree_arrival.hpp"
#include "store/exchange.hpp"
#include "store/protocol.hpp"
#include "store/torch_wire.hpp"

namespace cohort::detail {

using namespace node_keys;  // this part's own keys

namespace {
// How long an agent that ends waits for the relays under its own to move.
constexpr std::chrono::seconds kHandOver{2};
// How long a relay that arrives in the agents' tree waits for the places
// above its own to be published (each a round trip after its ADD, unless
// its agent died in between): then it passes them over.
constexpr std::chrono::seconds kArrivalPatience{2};

// How long a relay waits on a parent in the agents' tree that does not
// answer before it goes on through the next hop: half the heartbeat
// timeout, so that its node's heartbeats reach the store in time.
std::chrono::milliseconds hop_timeout(const NodeGroupOptions& options) {
  return options.heartbeat_timeout / 2;
}

// How long the heartbeat's connection waits for an answer to its WAIT (one
// interval) before this node counts the store lost: --heartbeat-timeout, as
// the coordinator waits for this node's heartbeat. In a tree, a WAIT out
// when this relay's parent is lost is answered after the hop timeout, the
// move to the next hop and the WAIT once more there: that long, and a
// second more. (Until 2026-12-06 every node gave the store the interval
// and 5 s.)
std::chrono::milliseconds store_patience(const NodeGroupOptions& options, bool in_a_tree) {
  const std::chrono::milliseconds interval = options.heartbeat_interval;
  if (!in_a_tree) return options.heartbeat_timeout;
  return std::max(options.heartbeat_timeout,
                  2 * interval + hop_timeout(options) + std::chrono::milliseconds(1000));
}

// What a relay placed as it arrives answers to (StoreServer::Options::name):
// a relay under it expects it by name, so that another process that later
// listens at the same address is not taken for it.
std::string relay_name() {
  std::random_device random;
  return cat("relay ", getpid(), "-", random());
}
}  // namespace

NodeGroup::NodeGroup(NodeGroupOptions options)
    : options_(std::move(options)), event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!event_.valid()) throw Error(cat("cohort run: eventfd failed: ", errno_text(errno)));
  port_ = options_.store_port;
  if (options_.serve_store || options_.serve_if_bindable) {
    options_.serve_store = start_server(!options_.serve_if_bindable);
  }
  if (options_.exchange) {
    const StoreAddress store = options_.exchange(
        server_ ? StoreAddress{options_.store_host, port_, options_.token} : StoreAddress{});
    options_.store_host = store.host;
    port_ = store.port;
    options_.token = store.token;
  }
  if (options_.serve_if_bindable && !server_) await_server_or_serve();
  if (options_.relay && !server_ && options_.nnodes > 1) start_relay();
  StoreClient::Options client = client_options();
  // Through the relay: past the relay's own attempts to connect, which say why they failed.
  client.timeout = options_.rendezvous_timeout + std::chrono::seconds(relay_ ? 5 : 0);
  // Through the relay, the first request is what meets the store: this
  // agent's last words, or, where it has no node rank yet, a probe.
  const bool leaves_words_first = relay_ && options_.node_rank >= 0;
  waiting_for(cat(node_name(options_.node_rank), " of ", options_.nnodes,
                  " waits for the job's store at ", options_.store_host, ":", port_));
  reach_store([&] {
    store_ = connect(client);
    if (relay_ && !leaves_words_first) (void)store_->num_keys();
  });
  if (server_ && options_.torch_port >= 0 && options_.nnodes > 1) {
    // Every worker's MASTER_PORT: PyTorch's clients meet in this store.
    store_->set(kMasterPort, std::to_string(server_->torch_port()));
  }
  if (options_.node_rank == kNodeRankAtJoin) take_node_rank();
  id_ = options_.node_rank;
  if (options_.nnodes > 1 || options_.node_rank < 0) {
    // Its first call may be the first to meet the store (above).
    if (!leaves_words_first) client.timeout = options_.heartbeat_timeout;
    auto watch = connect(client);
    if (!server_ && id_ >= 0) {
      // A killed agent's connection closes at once: the store then marks it
      // gone and wakes the coordinator, who need not wait for its heartbeat.
      // Through the relay, its connection upstream closes with this process.
      const auto leave_words = [&] {
        watch->run(StoreClient::Batch()
                       .set_on_close(gone_key(id_), "")
                       .set_on_close(kSomeoneGone, "")
                       .set_on_close(kCoordinatorWake, ""));
      };
      if (leaves_words_first) {
        reach_store(leave_words);
        watch->set_timeout(options_.heartbeat_timeout);
      } else {
        leave_words();
      }
    }
    const bool in_a_tree = relay_ && tree_has_inner_nodes(options_.nnodes, options_.tree_width);
    watch->set_server_grace(
        std::max(store_patience(options_, in_a_tree) - options_.heartbeat_interval,
                 std::chrono::milliseconds(1000)));
    watch_store_ = std::move(watch);
  }
  if (tree_on_arrival_) arrive_in_tree();
}

// Its place in the agents' tree as it arrives, where the tree is not known
// ahead (tree_arrival.hpp): by node rank where node ranks are known (the
// rendezvous then moves it again should its parent have come late), else
// by arrival. One whose place cannot be had stays under the store.
void NodeGroup::arrive_in_tree() {
  const StoreServer::Hop self{relay_->host(), relay_->port(), relay_name_};
  try {
    TreeArrival arrival =
        detail::arrive_in_tree(*store_, self, static_cast<std::int64_t>(tree_place_by_rank_),
                               options_.tree_width, kArrivalPatience);
    log(LogLevel::debug, "node",
        cat("this node's relay took place ", arrival.place, " of the agents' tree, ",
            arrival.path.empty()
                ? "under the store"
                : cat("under ", arrival.path.front().host, ":", arrival.path.front().port)));
    if (!arrival.path.empty()) relay_->route_through(std::move(arrival.path));
  } catch (const Error& error) {
    log(LogLevel::warn, "node",
        cat("this node's relay found no place in the agents' tree (", error.what(),
            "): it stays under the job's store at ", options_.store_host, ":", port_));
  }
}

void NodeGroup::reach_store(const std::function<void()>& reach) {
  try {
    reach();
  } catch (const Error& error) {
    if (!options_.token_source.empty() &&
        std::string_view(error.what()).find(detail::store_protocol::kWrongToken) !=
            std::string::npos) {
      throw InvalidArgument(cat(
          "cohort run: the job's store at ", options_.store_host, ":", port_, " refused ",
          node_name(options_.node_rank), "'s secret, the per-user one in ", options_.token_source,
          ": the node that serves the store read another (this node's home directory is not "
          "the same as there, or the file was made anew there). Copy ",
          options_.token_source, " from the node that serves the store (", options_.store_host,
          ") to every node, mode 600, or give every node the same --token-file FILE "
          "(docs/security.md)"));
    }
    throw unreachable_store(error);
  }
}

void NodeGroup::start_relay() {
  StoreServer::Options relay;
  relay.token = options_.token;
  relay.token_is_secret = options_.token_is_secret;
  relay.munge = options_.munge;
  relay.host = "127.0.0.1";
  relay.torch_port = options_.relay_torch_port;
  relay.torch_host = "127.0.0.1";
  relay.on_unservable = options_.on_unservable;
  relay.relay_to = StoreServer::Options::Upstream{options_.store_host, port_, options_.munge, "",
                                                  options_.rendezvous_timeout};
  relay.relay_to->connect_at_start = true;  // this agent's own first request needs it
  // A parent in the agents' tree cut off from the network is passed over
  // well before the coordinator would count this node's heartbeats gone.
  relay.relay_to->hop_timeout = hop_timeout(options_);
  const std::optional<TreeAhead> ahead = tree_ahead();
  if (ahead) {
    // Where the relays below find it before the rendezvous; should the
    // job's port be taken there, they find it after (below).
    if (ahead->parent) relay.relay_to->through = {*ahead->parent};
    StoreServer::Options at_job_port = relay;
    at_job_port.host = ahead->address;
    at_job_port.port = port_;
    at_job_port.name = cat("node ", options_.node_rank);
    try {
      relay_ = std::make_unique<StoreServer>(std::move(at_job_port));
      relay_address_ = cat(ahead->address, ":", relay_->port());
      return;
    } catch (const Error& error) {
      log(LogLevel::info, "node",
          cat("this node's relay cannot listen on the job's port at ", ahead->address, ":", port_,
              " (", error.what(),
              "): the relays under it in the agents' tree find it after the rendezvous, on "
              "another port"));
    }
  }
  // Other nodes' relays under it in the agents' tree reach it where this
  // node reaches the store from; in a job too small for a tree, nobody
  // beyond this node's own processes does, and none is put under it
  // (agent_tree.hpp).
  std::string reachable;
  if (tree_has_inner_nodes(options_.nnodes, options_.tree_width)) {
    const Route route = route_to_resolving_in_place(options_.store_host);
    if (route.found) reachable = route.source_address;
  }
  if (!reachable.empty()) relay.host = reachable;
  // Where the tree is not known ahead, it forms as the relays arrive
  // (tree_arrival.hpp), not at the rendezvous.
  tree_on_arrival_ = !reachable.empty() && !ahead;
  if (tree_on_arrival_ && options_.store_node && options_.node_rank >= 0 && !elastic())
    tree_place_by_rank_ = tree_place_ahead(options_.node_rank, *options_.store_node);
  if (tree_on_arrival_) {
    relay_name_ = relay_name();
    relay.name = relay_name_;
  }
  relay_ = std::make_unique<StoreServer>(std::move(relay));
  if (!reachable.empty()) relay_address_ = cat(reachable, ":", relay_->port());
}

std::optional<NodeGroup::TreeAhead> NodeGroup::tree_ahead() const {
  const int id = options_.node_rank;
  if (!options_.store_node || id < 0 || elastic() || port_ <= 0 ||
      !tree_has_inner_nodes(options_.nnodes, options_.tree_width) ||
      options_.node_hosts.size() != static_cast<std::size_t>(options_.nnodes)) {
    return std::nullopt;
  }
  std::string why;
  TreeAhead ahead;
  // Its own host's name, resolved to one of this machine's addresses: where
  // the relays below, which know only that name, connect.
  ahead.address = listen_address_for(options_.node_hosts[static_cast<std::size_t>(id)], &why);
  // A name that resolves to loopback here (Debian gives a host's own name
  // 127.0.1.1) is not where other hosts reach it, unless the store too is
  // on loopback (every node on this machine).
  if (!ahead.address.empty() && ahead.address.rfind("127.", 0) == 0 &&
      route_to_resolving_in_place(options_.store_host).host_address.rfind("127.", 0) != 0) {
    why = cat(options_.node_hosts[static_cast<std::size_t>(id)], " resolves to ", ahead.address,
              " here, a loopback address");
    ahead.address.clear();
  }
  if (ahead.address.empty()) {
    log(LogLevel::debug, "node", cat("the agents' tree forms at the rendezvous: ", why));
    return std::nullopt;
  }
  const int parent =
      tree_parent_ahead(id, options_.nnodes, *options_.store_node, options_.tree_width);
  if (parent >= 0) {
    const Route route =
        route_to_resolving_in_place(options_.node_hosts[static_cast<std::size_t>(parent)]);
    // Unresolved, it is found at the rendezvous.
    if (route.found)
      ahead.parent = StoreServer::Hop{route.host_address, port_, cat("node ", parent)};
  }
  return ahead;
}

void NodeGroup::route_relay(const std::vector<int>& ids, const std::vector<std::string>& entries) {
  // One placed in the order of arrival stays: the places by id could put a
  // relay under one that arrived under it.
  if (!relay_ || (tree_on_arrival_ && tree_place_by_rank_ == 0)) return;
  std::vector<TreeMember> members;
  for (std::size_t i = 0; i < ids.size() && i < entries.size(); ++i)
    members.push_back({ids[i], entry_relay(entries[i])});
  std::vector<StoreServer::Hop> path;
  for (const std::string& address : tree_path(id_, members, options_.tree_width)) {
    const std::size_t colon = address.rfind(':');
    const auto port = parse_int(address.substr(colon + 1));
    if (colon == std::string::npos || !port) continue;  // not one of ours: passed over
    path.push_back({address.substr(0, colon), static_cast<int>(*port)});
  }
  relay_->route_through(std::move(path));
}

StoreClient::Options NodeGroup::client_options() const {
  StoreClient::Options client;
  const bool every_interface = options_.bind_host.empty() || options_.bind_host == "0.0.0.0";
  client.host = !server_ ? options_.store_host : every_interface ? "127.0.0.1" : options_.bind_host;
  client.port = port_;
  client.token = options_.token;
  client.munge = options_.munge && !server_;
  return client;
}

std::shared_ptr<StoreClient> NodeGroup::connect(const StoreClient::Options& client) const {
  // While the agent joins, a second at a time, so that a stop signal ends
  // the wait for a store that does not answer.
  std::shared_ptr<StoreClient> made =
      server_  ? server_->connect_in_process(client.timeout)
      : relay_ ? relay_->connect_in_process(client.timeout)
      : options_.join_watch
          ? connect_in_turns(client, Clock::now() + client.timeout, std::chrono::seconds(1), {})
          : std::make_shared<StoreClient>(client);
  if (options_.join_watch) options_.join_watch->end_on_stop(made);
  return made;
}

// A try that fails within half its turn met something there that is not
// this job's store (a client retries a refused connection until its
// timeout): that fails at once, as a try at the deadline or after a stop
// signal does.
std::shared_ptr<StoreClient> NodeGroup::connect_in_turns(
    StoreClient::Options client, Clock::time_point deadline, std::chrono::milliseconds turn,
    const std::function<bool()>& between) const {
  const std::chrono::milliseconds patience = client.timeout;
  for (;;) {
    const auto start = Clock::now();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start);
    client.timeout = std::clamp(left, std::chrono::milliseconds{1}, turn);
    try {
      auto made = std::make_shared<StoreClient>(client);
      made->set_timeout(patience);
      return made;
    } catch (const Error&) {
      const auto now = Clock::now();
      const bool stopped = options_.join_watch && options_.join_watch->stopped();
      if (now >= deadline || now - start < client.timeout / 2 || stopped) throw;
    }
    if (between && between()) return nullptr;
  }
}

void NodeGroup::waiting_for(std::string what) const {
  if (options_.join_watch) options_.join_watch->waiting_for(std::move(what));
}

Timeout NodeGroup::unreachable_store(const Error& error) const {
  return Timeout(cat("cohort run: ", node_name(options_.node_rank), " of ", options_.nnodes,
                     " could not reach the job's store at ", options_.store_host, ":", port_, " (",
                     error.what(),
                     "). Check that node 0's cohort run started with the same --nnodes, "
                     "--master-addr and --master-port (or --rdzv-endpoint, or in the same Slurm "
                     "step), that ",
                     options_.store_host,
                     " resolves here to node 0, and that no firewall "
                     "blocks the port"));
}

// torchrun's c10d form, for an agent that could not bind the endpoint: it
// connects, and while no one answers there it tries to bind again, until
// the rendezvous timeout. Another process may have held the port for a
// moment (an outgoing connection's local port): then every agent of the job
// failed to bind, and without this all would wait the whole timeout for a
// server that never comes. A client retries a refused connection until its
// timeout, so a probe that fails sooner met something there that is not
// this job's store: that fails at once, as it always did.
void NodeGroup::await_server_or_serve() {
  try {
    (void)connect_in_turns(client_options(), Clock::now() + options_.rendezvous_timeout,
                           std::chrono::seconds(2), [this] { return start_server(false); });
  } catch (const Error& error) {
    throw unreachable_store(error);
  }
}

// Returns whether this process now serves the store; when it must and
// cannot, throws naming the port.
bool NodeGroup::start_server(bool required) {
  StoreServer::Options server;
  server.host = options_.bind_host.empty() ? "0.0.0.0" : options_.bind_host;
  server.port = options_.store_port;
  server.token = options_.token;
  server.token_is_secret = options_.token_is_secret;
  server.munge = options_.munge;
  server.torch_port = options_.torch_port;
  server.torch_remote = options_.nnodes > 1;
  server.torch_host = options_.torch_host;
  server.on_unservable = options_.on_unservable;
  try {
    server_ = std::make_unique<StoreServer>(server);
  } catch (const torch_wire::PortError& error) {
    if (!required) return false;
    throw Error(
        cat("cohort run: the workers' MASTER_PORT, where the agent serves PyTorch's "
            "TCPStore: ",
            error.what(),
            options_.torch_port != 0 ? "; it comes from --master-port: drop it (cohort "
                                       "picks a free port) or choose another"
                                     : ""));
  } catch (const Error& error) {
    if (!required) return false;  // someone else on this host serves it, or it is elsewhere
    throw Error(
        cat("cohort run: ", node_name(options_.node_rank),
            " serves the job's store but cannot listen on ", server.host, ":", options_.store_port,
            ": ", error.what(),
            options_.store_port != 0
                ? "; another job may hold it: choose another --master-port or --rdzv-endpoint"
                : ""));
  }
  port_ = server_->port();
  return true;
}

// torchrun's c10d form: node ranks in order of arrival, 0 for the server.
void NodeGroup::take_node_rank() {
  if (server_) {
    options_.node_rank = 0;
    return;
  }
  const std::int64_t rank = store_->add(kNextNode, 1);
  // Elastic: a node that replaces a lost one comes after every other.
  if (rank >= options_.nnodes && !elastic()) {
    throw Error(cat("cohort run: more than ", options_.nnodes, " agents joined the rendezvous at ",
                    options_.store_host, ":", port_,
                    ": --nnodes is too small, or another job uses the same --rdzv-endpoint (give "
                    "each job its own --rdzv-id and port)"));
  }
  options_.node_rank = static_cast<int>(rank);
}

void NodeGroup::forget_torch_keys() {
  if (server_) server_->forget_torch_keys();
}

int NodeGroup::torch_port() const noexcept {
  return server_ ? server_->torch_port() : -1;
}

NodeGroup::~NodeGroup() {
  quit_ = true;
  if (server_ && elastic()) {
    try {  // agents waiting to be taken in: the job is over
      store_->set(kJobOver, "");
    } catch (const Error&) {
    }
  }
  if (watcher_.joinable()) {
    // The heartbeat thread's call under way fails now, not at its next tick,
    // and it ends (quit_). Its connection's end is this agent's last word:
    // whoever serves the store sees it leave (see_off) at once.
    watch_store_->shut_down();
    watcher_.join();
  }
  // Other nodes' relays that reach the store through this one go on
  // through their next hop first, once their requests out are answered:
  // a node that ends before those under it loses none of theirs. One that
  // lost the store (cut off, or the store gone) has nothing to hand over:
  // its children are cut off from it too, or lose the store as it did.
  if (!relay_address_.empty() && !store_lost()) (void)relay_->hand_over(kHandOver);
}

std::string NodeGroup::node_name(int node) const {
  if (node == kNodeRankAtJoin) return cat("a ", options_.unit);
  if (node < 0) return "the launcher";
  const auto index = static_cast<std::size_t>(node);
  std::lock_guard<std::mutex> lock(members_mutex_);
  const std::vector<std::string>& hosts = hosts_.empty() ? options_.node_hosts : hosts_;
  if (index < hosts.size() && !hosts[index].empty())
    return cat(options_.unit, " ", node, " (", hosts[index], ")");
  return cat(options_.unit, " ", node);
}

std::string NodeGroup::member_host(int id) const {
  std::lock_guard<std::mutex> lock(members_mutex_);
  const auto at =
      static_cast<std::size_t>(std::find(members_.begin(), members_.end(), id) - members_.begin());
  const std::vector<std::string>& hosts = hosts_.empty() ? options_.node_hosts : hosts_;
  return at < hosts.size() ? hosts[at] : std::string();
}

void NodeGroup::notify() noexcept {
  const std::uint64_t one = 1;
  (void)!::write(event_.get(), &one, sizeof(one));
}

void NodeGroup::wake_everyone() {
  StoreClient::Batch wake_ups;
  store_->run(add_wake_ups(wake_ups, members()).set(kCoordinatorWake, ""));
}

StopRecord NodeGroup::declare_stop(const StopRecord& record) {
  const std::string encoded = record.encode();
  std::string first;
  try {
    first = store_->compare_set(stop_key(attempt_), "", encoded);
    wake_everyone();
  } catch (const Error&) {
    return record;  // the store is gone: nobody else can be told anyway
  }
  return StopRecord::decode(first).value_or(record);
}

std::optional<StopRecord> NodeGroup::stop_record() {
  std::string lost_reason;
  {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    lost_reason = lost_;
  }
  if (!lost_reason.empty()) return lost_store(lost_reason);
  try {
    const std::string key = stop_key(attempt_);
    if (!store_->check({key})) return std::nullopt;
    return StopRecord::decode(store_->get(key, options_.heartbeat_timeout));
  } catch (const Error& error) {
    return lost_store(error.what());
  }
}

StopRecord NodeGroup::lost_store(const std::string& why) const {
  StopRecord lost;
  lost.node = options_.serve_store ? options_.node_rank : 0;
  lost.host = options_.store_host;
  lost.summary = cat(
      node_name(options_.node_rank), " lost the job's store at ", options_.store_host, ":", port_,
      " (the cohort run serving it, on node 0 or the --hostfile launcher, was killed, "
      "its host went down, or the network between is cut): ",
      why);
  // Through this node's relay: which of the two stopped answering.
  if (relay_) {
    lost.summary += cat("; this node's relay at ", relay_->host(), ":", relay_->port(), ": ",
                        relay_->upstream_state());
  }
  return lost;
}

bool NodeGroup::all_done() {
  if (all_done_) return true;
  try {
    return store_->check({all_done_key(attempt_)});
  } catch (const Error&) {
    return true;  // nobody is left to wait for
  }
}

bool NodeGroup::store_lost() {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  return !lost_.empty();
}

void NodeGroup::finished() {
  // A lost store would make every call wait out its deadline for nothing.
  if (options_.node_rank < 0 || store_lost() || finished_ == attempt_) return;
  finished_ = attempt_;
  try {
    // A round trip each, not one per request: the last node's are on the
    // way out of the job for every node.
    const auto done = store_->run(StoreClient::Batch()
                                      .set(done_key(attempt_, options_.node_rank), "")
                                      .add(done_count_key(attempt_), 1));
    if (done.at(0) == round_size()) announce_all_done(*store_, attempt_);
  } catch (const Error&) {  // the store is gone; nothing waits for this node any more
  }
}

void NodeGroup::announce_all_done(StoreClient& store, int attempt) {
  StoreClient::Batch all_done;
  all_done.set(all_done_key(attempt), "");
  // With restarts every agent waits for the others; else the coordinator.
  if (options_.max_restarts > 0 || elastic()) add_wake_ups(all_done, members());
  store.run(all_done.set(kCoordinatorWake, ""));
}

bool NodeGroup::restartable(const StopRecord& record) const {
  return budget().restartable(record, restarts_, round_size());
}

bool NodeGroup::may_restart() const noexcept {
  return budget().may_restart(restarts_);
}

RestartBudget NodeGroup::budget() const noexcept {
  return {options_.max_restarts, elastic(), options_.min_nodes};
}

void NodeGroup::linger(std::chrono::milliseconds at_most) {
  if (!server_ && options_.node_rank >= 0) return;
  // Every node that may still read the store says when it is done; a node
  // known to be lost never will.
  const auto record = stop_record();
  std::vector<std::string> keys;
  const std::vector<int> ids = members();
  for (int node = 0; node < round_size(); ++node) {
    if (record && record->node_lost && record->node == node) continue;
    // Elastic: the nodes settle() found lost.
    if (static_cast<std::size_t>(node) < ids.size() && lost_ids_.count(ids[node]) != 0) continue;
    keys.push_back(done_key(attempt_, node));
  }
  try {
    store_->wait(keys, at_most);
  } catch (const Error&) {  // a node that vanished unnoticed never reports; leave anyway
  }
}

bool NodeGroup::see_off(std::chrono::milliseconds at_most) {
  if (!server_) return true;
  std::vector<std::string> keys;
  for (int id : members()) {
    if (id != id_ && lost_ids_.count(id) == 0) keys.push_back(gone_key(id));
  }
  if (keys.empty()) return true;
  try {
    store_->wait(keys, at_most);
    return true;
  } catch (const Error&) {  // an agent cut off from here never closes; leave anyway
    return false;
  }
}

void NodeGroup::publish_trace(const std::string& events) {
  try {
    store_->set(trace_key(id_), events);
  } catch (const Error& error) {  // the store is gone: the trace lacks this node
    log(LogLevel::warn, "run", cat("the trace lacks this node's events: ", error.what()));
  }
}

void NodeGroup::publish_trace_to(const StoreAddress& store, int id, const std::string& events) {
  try {
    StoreClient::Options client;
    client.host = store.host;
    client.port = store.port;
    client.token = store.token;
    client.timeout = std::chrono::seconds(5);
    StoreClient(client).set(trace_key(id), events);
  } catch (const Error& error) {
    log(LogLevel::warn, "run", cat("the trace lacks this node's events: ", error.what()));
  }
}

std::vector<std::string> NodeGroup::gather_traces(const std::vector<int>& ids,
                                                  std::chrono::milliseconds at_most) {
  std::vector<std::string> events;
  std::vector<int> pending = ids;
  const auto deadline = Clock::now() + at_most;
  const auto missing = [this, &events](int id, const std::string& why) {
    events.push_back(missing_node_events(id, member_host(id), why));
  };
  // The published value, if it is there; throws when the store is gone.
  const auto take = [this, &events](int id) {
    if (!store_->check({trace_key(id)})) return false;
    events.push_back(store_->get(trace_key(id), std::chrono::seconds(1)));
    return true;
  };
  try {
    for (;;) {
      std::vector<int> still;
      for (int id : pending) {
        if (take(id)) continue;
        // Gone first, then looked at again: it may have published between.
        if (store_->check({gone_key(id)})) {
          if (!take(id)) missing(id, "its agent ended without sending them");
          continue;
        }
        still.push_back(id);
      }
      pending = std::move(still);
      if (pending.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const Error&) {  // the store is gone: what came is what there is
  }
  for (int id : pending)
    missing(id, cat("none came within ", seconds(at_most)));
  return events;
}

}  // namespace cohort::detail

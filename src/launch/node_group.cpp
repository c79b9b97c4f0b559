#include "launch/node_group.hpp"

#include <algorithm>
#include <mutex>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/exchange.hpp"
#include "store/torch_wire.hpp"

namespace cohort::detail {
namespace {

constexpr std::string_view kMasterPort = "agents/master_port";
constexpr std::string_view kCoordinatorWake = "agents/wake/c";
constexpr std::string_view kNextNode = "agents/next_node";
constexpr std::string_view kRunId = "agents/run_id";

constexpr std::string_view kNodes = "agents/node";  // each agent's entry, exchanged at the join

std::string node_key(int node) {
  return exchanged_key(kNodes, node);
}
// Per attempt: the first stop, each node's end of it, every node done,
// and (written by node 0 once every node ended it) the next one's start.
std::string stop_key(int attempt) {
  return cat("agents/stop/", attempt);
}
std::string done_key(int attempt, int node) {
  return cat("agents/done/", attempt, "/", node);
}
std::string done_count_key(int attempt) {
  return cat("agents/done/", attempt);
}
std::string all_done_key(int attempt) {
  return cat("agents/all_done/", attempt);
}
std::string ended_key(int attempt, int node) {
  return cat("agents/ended/", attempt, "/", node);
}
std::string start_key(int attempt) {
  return cat("agents/start/", attempt);
}
std::string heartbeat_key(int node) {
  return cat("agents/hb/", node);
}
std::string wake_key(int node) {
  return cat("agents/wake/", node);
}

std::vector<std::string> split_tabs(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = text.find('\t', start);
    out.push_back(text.substr(start, tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

std::string seconds(std::chrono::milliseconds time) {
  return time.count() % 1000 == 0 ? cat(time.count() / 1000, " s") : cat(time.count(), " ms");
}

}  // namespace

std::string StopRecord::encode() const {
  std::string clean = summary;
  for (char& c : clean)
    if (c == '\t' || c == '\n') c = ' ';
  return cat(node, '\t', host, '\t', rank, '\t', exit_code, '\t', node_lost ? 1 : 0, '\t', clean);
}

std::optional<StopRecord> StopRecord::decode(const std::string& text) {
  const std::vector<std::string> fields = split_tabs(text);
  if (fields.size() != 6) return std::nullopt;
  auto node = parse_int(fields[0]);
  auto rank = parse_int(fields[2]);
  auto code = parse_int(fields[3]);
  if (!node || !rank || !code) return std::nullopt;
  StopRecord record;
  record.node = static_cast<int>(*node);
  record.host = fields[1];
  record.rank = static_cast<int>(*rank);
  record.exit_code = static_cast<int>(*code);
  record.node_lost = fields[4] == "1";
  record.summary = fields[5];
  return record;
}

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
  StoreClient::Options& client = client_;
  const bool every_interface = options_.bind_host.empty() || options_.bind_host == "0.0.0.0";
  client.host = !server_ ? options_.store_host : every_interface ? "127.0.0.1" : options_.bind_host;
  client.port = port_;
  client.token = options_.token;
  client.munge = options_.munge && !server_;
  client.timeout = options_.rendezvous_timeout;
  try {
    store_ = std::make_shared<StoreClient>(client);
  } catch (const Error& error) {
    throw Timeout(cat("cohort run: ", node_name(options_.node_rank), " of ", options_.nnodes,
                      " could not reach the job's store at ", options_.store_host, ":", port_,
                      " within ", seconds(options_.rendezvous_timeout), " (", error.what(),
                      "). Check that node 0's cohort run started with the same --nnodes, "
                      "--master-addr and --master-port (or --rdzv-endpoint, or in the same Slurm "
                      "step), that ",
                      options_.store_host,
                      " resolves here to node 0, and that no firewall "
                      "blocks the port"));
  }
  if (server_ && options_.torch_port >= 0 && options_.nnodes > 1) {
    // Every worker's MASTER_PORT: PyTorch's clients meet in this store.
    store_->set(kMasterPort, std::to_string(server_->torch_port()));
  }
  if (options_.node_rank == kNodeRankAtJoin) take_node_rank();
  if (options_.nnodes > 1 || options_.node_rank < 0) {
    client.timeout = options_.heartbeat_timeout;
    watch_store_ = std::make_shared<StoreClient>(client);
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
  if (rank >= options_.nnodes) {
    throw Error(cat("cohort run: more than ", options_.nnodes, " agents joined the rendezvous at ",
                    options_.store_host, ":", port_,
                    ": --nnodes is too small, or another job uses the same --rdzv-endpoint (give "
                    "each job its own --rdzv-id and port)"));
  }
  options_.node_rank = static_cast<int>(rank);
}

int NodeGroup::torch_port() const noexcept {
  return server_ ? server_->torch_port() : -1;
}

NodeGroup::~NodeGroup() {
  quit_ = true;
  if (!watcher_.joinable()) return;
  if (!store_lost()) {
    try {  // wake the heartbeat thread now rather than at its next tick
      store_->set(server_ || options_.node_rank < 0 ? std::string(kCoordinatorWake)
                                                    : wake_key(options_.node_rank),
                  "");
    } catch (const Error&) {  // the store is gone: the thread's calls fail and it ends
    }
  }
  watcher_.join();
}

std::string NodeGroup::node_name(int node) const {
  if (node == kNodeRankAtJoin) return cat("a ", options_.unit);
  if (node < 0) return "the launcher";
  const auto index = static_cast<std::size_t>(node);
  const std::vector<std::string>& hosts = hosts_.empty() ? options_.node_hosts : hosts_;
  if (index < hosts.size() && !hosts[index].empty())
    return cat(options_.unit, " ", node, " (", hosts[index], ")");
  return cat(options_.unit, " ", node);
}

Placement NodeGroup::join(int nproc, const std::string& host, const std::string& node,
                          const std::string& run_id) {
  // One node picks its workers' port per attempt itself (Agent::spawn_all).
  const bool several = options_.nnodes > 1;
  if (several && options_.node_rank == 0) {
    store_->set(kRunId, run_id);
    if (options_.torch_port < 0) store_->set(kMasterPort, std::to_string(pick_free_port()));
  }
  // Every agent's entry to every agent in O(nnodes) requests (a wait for
  // every node key by every agent is nnodes² key waits: docs/rendezvous.md).
  std::vector<std::string> entries;
  try {
    entries = exchange_values(*store_, kNodes, options_.node_rank, options_.nnodes,
                              cat(nproc, '\t', host, '\t', getpid(), '\t', node),
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
  Placement placement;
  std::vector<AgentEntry> agents;
  for (const std::string& entry : entries) {
    const std::vector<std::string> fields = split_tabs(entry);
    AgentEntry agent;
    agent.nproc = fields.empty() ? 0 : static_cast<int>(parse_int(fields[0]).value_or(0));
    agent.node = fields.size() > 3 ? fields[3] : cat("agent ", agents.size());
    agents.push_back(agent);
    placement.hosts.push_back(fields.size() > 1 ? fields[1] : "");
  }
  placement.layout = lay_out_workers(agents, options_.node_rank);
  placement.rank_base = placement.layout.mine.empty() ? 0 : placement.layout.mine.front().rank;
  placement.world_size = placement.layout.world_size;
  placement.run_id = run_id;
  if (several) {
    placement.master_port = static_cast<int>(
        parse_int(store_->get(kMasterPort, options_.rendezvous_timeout)).value_or(0));
    placement.run_id = store_->get(kRunId, options_.rendezvous_timeout);
  }
  hosts_ = placement.hosts;
  // From now on a call that hangs means a lost store: bound it like a heartbeat.
  client_.timeout = options_.heartbeat_timeout;
  store_ = std::make_shared<StoreClient>(client_);
  if (watch_store_) watcher_ = std::thread([this] { watch(); });
  return placement;
}

void NodeGroup::start_watching() {
  hosts_ = options_.node_hosts;
  client_.timeout = options_.heartbeat_timeout;
  store_ = std::make_shared<StoreClient>(client_);
  watcher_ = std::thread([this] { watch(); });
}

void NodeGroup::notify() noexcept {
  const std::uint64_t one = 1;
  (void)!::write(event_.get(), &one, sizeof(one));
}

void NodeGroup::wake_everyone() {
  for (int node = 0; node < options_.nnodes; ++node)
    store_->set(wake_key(node), "");
  store_->set(kCoordinatorWake, "");
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
    store_->set(done_key(attempt_, options_.node_rank), "");
    if (store_->add(done_count_key(attempt_), 1) == options_.nnodes) {
      store_->set(all_done_key(attempt_), "");
      // With restarts every agent waits for the others; else the coordinator.
      if (options_.max_restarts > 0) {
        wake_everyone();
      } else {
        store_->set(kCoordinatorWake, "");
      }
    }
  } catch (const Error&) {  // the store is gone; nothing waits for this node any more
  }
}

bool NodeGroup::restartable(const StopRecord& record) const {
  return record.rank >= 0 && !record.node_lost && attempt_ < options_.max_restarts;
}

int NodeGroup::begin_next_attempt(std::chrono::milliseconds grace) {
  const auto bound = grace + 2 * options_.heartbeat_timeout + std::chrono::seconds(5);
  const int next = attempt_ + 1;
  if (options_.node_rank >= 0) store_->set(ended_key(attempt_, options_.node_rank), "");
  if (options_.node_rank == 0) {
    // Every node's workers of this attempt are gone before any of the next
    // starts: then no rank of the old attempt meets one of the new.
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
                        " did not stop its workers of attempt ", next, " within ", seconds(bound)));
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
  attempt_ = next;
  return port;
}

void NodeGroup::linger(std::chrono::milliseconds at_most) {
  if (!server_ && options_.node_rank >= 0) return;
  // Every node that may still read the store says when it is done; a node
  // known to be lost never will.
  const auto record = stop_record();
  std::vector<std::string> keys;
  for (int node = 0; node < options_.nnodes; ++node) {
    if (record && record->node_lost && record->node == node) continue;
    keys.push_back(done_key(attempt_, node));
  }
  try {
    store_->wait(keys, at_most);
  } catch (const Error&) {  // a node that vanished unnoticed never reports; leave anyway
  }
}

// The heartbeat thread. Every interval each agent adds 1 to its counter; the
// coordinator checks that every counter moves. It wakes early when its wake
// key is set (a stop, or every node done).
void NodeGroup::watch() {
  const bool coordinator = server_ != nullptr || options_.node_rank < 0;
  const std::string wake =
      coordinator ? std::string(kCoordinatorWake) : wake_key(options_.node_rank);
  std::vector<std::int64_t> last_count(static_cast<std::size_t>(options_.nnodes), -1);
  std::vector<bool> arrived(static_cast<std::size_t>(options_.nnodes), options_.node_rank >= 0);
  std::vector<Clock::time_point> last_change(static_cast<std::size_t>(options_.nnodes),
                                             Clock::now());
  bool stop_seen = false;
  int seen_attempt = attempt_;
  try {
    while (!quit_) {
      try {
        watch_store_->wait({wake}, options_.heartbeat_interval);
        watch_store_->delete_key(wake);
      } catch (const Timeout&) {
      }
      if (quit_) return;
      if (options_.node_rank >= 0) watch_store_->add(heartbeat_key(options_.node_rank), 1);
      const int attempt = attempt_;
      if (attempt != seen_attempt) {
        // A restart: the nodes were busy stopping and starting, not lost.
        seen_attempt = attempt;
        stop_seen = false;
        std::fill(last_change.begin(), last_change.end(), Clock::now());
      }
      if (!stop_seen && watch_store_->check({stop_key(attempt)})) {
        stop_seen = true;
        notify();
        // Keep beating while the job may restart: the coordinator must not
        // take a node that stops and starts again for a lost one.
        if (!coordinator && attempt >= options_.max_restarts) return;
      }
      const bool waits_for_all = coordinator || options_.max_restarts > 0;
      if (waits_for_all && !all_done_ && watch_store_->check({all_done_key(attempt)})) {
        all_done_ = true;
        notify();
        return;
      }
      if (!coordinator) continue;
      const auto now = Clock::now();
      for (int node = 0; node < options_.nnodes; ++node) {
        const auto index = static_cast<std::size_t>(node);
        if (node == options_.node_rank) continue;
        if (!arrived[index]) {  // the --hostfile launcher waits for each node to join
          arrived[index] = watch_store_->check({node_key(node)});
          last_change[index] = now;
          continue;
        }
        const std::int64_t count = watch_store_->add(heartbeat_key(node), 0);
        if (count != last_count[index]) {
          last_count[index] = count;
          last_change[index] = now;
          continue;
        }
        if (stop_seen || now - last_change[index] < options_.heartbeat_timeout) continue;
        if (watch_store_->check({done_key(attempt, node)})) continue;
        StopRecord lost;
        lost.node = node;
        lost.node_lost = true;
        lost.host = index < hosts_.size() ? hosts_[index] : "";
        lost.summary = cat(node_name(node),
                           " stopped answering: no heartbeat from its cohort run "
                           "for ",
                           seconds(options_.heartbeat_timeout),
                           " (the agent was killed, the node went down, or its network is cut)");
        watch_store_->compare_set(stop_key(attempt), "", lost.encode());
        for (int other = 0; other < options_.nnodes; ++other)
          watch_store_->set(wake_key(other), "");
        stop_seen = true;
        notify();
      }
    }
  } catch (const Error& error) {
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

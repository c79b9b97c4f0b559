#include "launch/node_group.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/exchange.hpp"
#include "store/protocol.hpp"
#include "store/torch_wire.hpp"

namespace cohort::detail {
namespace {

constexpr std::string_view kMasterPort = "agents/master_port";
constexpr std::string_view kCoordinatorWake = "agents/wake/c";
constexpr std::string_view kNextNode = "agents/next_node";
constexpr std::string_view kRunId = "agents/run_id";
constexpr std::string_view kJobOver = "agents/over";  // elastic: for agents waiting to join

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
std::string verdict_key(int attempt) {
  return cat("agents/verdict/", attempt);
}
std::string start_key(int attempt) {
  return cat("agents/start/", attempt);
}
// Heartbeats and wake-ups go to an agent (its id), whatever its node rank.
std::string heartbeat_key(int id) {
  return cat("agents/hb/", id);
}
std::string wake_key(int id) {
  return cat("agents/wake/", id);
}
// Elastic rounds: the agents that registered, each one's slot, the table.
std::string round_count_key(int round) {
  return cat("agents/round/", round);
}
std::string round_slot_key(int round, std::int64_t slot) {
  return cat("agents/round/", round, "/", slot);
}
std::string round_table_key(int round) {
  return cat("agents/round/", round, "/table");
}

// An agent's rendezvous entry is "nproc\thost\tpid\tnode".
std::string entry_host(const std::string& entry) {
  const std::vector<std::string> fields = split_at(entry, '\t');
  return fields.size() > 1 ? fields[1] : "";
}

std::string seconds(std::chrono::milliseconds time) {
  return time.count() % 1000 == 0 ? cat(time.count() / 1000, " s") : cat(time.count(), " ms");
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
  StoreClient::Options& client = client_;
  client = client_options();
  client.timeout = options_.rendezvous_timeout;
  try {
    store_ = std::make_shared<StoreClient>(client);
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
  if (server_ && options_.torch_port >= 0 && options_.nnodes > 1) {
    // Every worker's MASTER_PORT: PyTorch's clients meet in this store.
    store_->set(kMasterPort, std::to_string(server_->torch_port()));
  }
  if (options_.node_rank == kNodeRankAtJoin) take_node_rank();
  id_ = options_.node_rank;
  if (options_.nnodes > 1 || options_.node_rank < 0) {
    client.timeout = options_.heartbeat_timeout;
    watch_store_ = std::make_shared<StoreClient>(client);
  }
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

Timeout NodeGroup::unreachable_store(const Error& error) const {
  return Timeout(cat("cohort run: ", node_name(options_.node_rank), " of ", options_.nnodes,
                     " could not reach the job's store at ", options_.store_host, ":", port_,
                     " within ", seconds(options_.rendezvous_timeout), " (", error.what(),
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
  constexpr std::chrono::milliseconds kTurn{2000};
  const auto deadline = Clock::now() + options_.rendezvous_timeout;
  for (;;) {
    StoreClient::Options probe = client_options();
    const auto start = Clock::now();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start);
    probe.timeout = std::clamp(left, std::chrono::milliseconds{1}, kTurn);
    try {
      const StoreClient reached(probe);  // connected: someone serves it
      return;
    } catch (const Error& error) {
      const auto now = Clock::now();
      if (now >= deadline || now - start < probe.timeout / 2) throw unreachable_store(error);
    }
    if (start_server(false)) return;
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
  if (!watcher_.joinable()) return;
  if (!store_lost()) {
    try {  // wake the heartbeat thread now rather than at its next tick
      store_->set(server_ || options_.node_rank < 0 ? std::string(kCoordinatorWake) : wake_key(id_),
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
  std::lock_guard<std::mutex> lock(members_mutex_);
  const std::vector<std::string>& hosts = hosts_.empty() ? options_.node_hosts : hosts_;
  if (index < hosts.size() && !hosts[index].empty())
    return cat(options_.unit, " ", node, " (", hosts[index], ")");
  return cat(options_.unit, " ", node);
}

Placement NodeGroup::join(int nproc, const std::string& host, const std::string& node,
                          const std::string& run_id) {
  const std::string mine = cat(nproc, '\t', host, '\t', getpid(), '\t', node);
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
    restarts_ = table.restarts;
  } else {
    entries = exchange_entries(mine, run_id);
    for (int other = 0; other < options_.nnodes; ++other)
      ids.push_back(other);
    placement.run_id = run_id;
    if (options_.nnodes > 1) {
      placement.master_port = static_cast<int>(
          parse_int(store_->get(kMasterPort, options_.rendezvous_timeout)).value_or(0));
      placement.run_id = store_->get(kRunId, options_.rendezvous_timeout);
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
  begin_round(ids, placement.hosts);
  if (!watcher_.joinable()) {
    // From now on a call that hangs means a lost store: bound it like a heartbeat.
    client_.timeout = options_.heartbeat_timeout;
    store_ = std::make_shared<StoreClient>(client_);
    if (watch_store_) watcher_ = std::thread([this] { watch(); });
  }
  return placement;
}

// Every agent's entry to every agent in O(nnodes) requests (a wait for
// every node key by every agent is nnodes² key waits: docs/rendezvous.md).
std::vector<std::string> NodeGroup::exchange_entries(const std::string& mine,
                                                     const std::string& run_id) {
  // One node picks its workers' port per attempt itself (Agent::spawn_all).
  if (options_.nnodes > 1 && options_.node_rank == 0) {
    store_->set(kRunId, run_id);
    if (options_.torch_port < 0) store_->set(kMasterPort, std::to_string(pick_free_port()));
  }
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
  client_.timeout = options_.heartbeat_timeout;
  store_ = std::make_shared<StoreClient>(client_);
  watcher_ = std::thread([this] { watch(); });
}

void NodeGroup::notify() noexcept {
  const std::uint64_t one = 1;
  (void)!::write(event_.get(), &one, sizeof(one));
}

void NodeGroup::wake_everyone() {
  for (int id : members())
    store_->set(wake_key(id), "");
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
    if (store_->add(done_count_key(attempt_), 1) == round_size()) {
      store_->set(all_done_key(attempt_), "");
      // With restarts every agent waits for the others; else the coordinator.
      if (options_.max_restarts > 0 || elastic()) {
        wake_everyone();
      } else {
        store_->set(kCoordinatorWake, "");
      }
    }
  } catch (const Error&) {  // the store is gone; nothing waits for this node any more
  }
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

std::chrono::milliseconds NodeGroup::restart_bound(std::chrono::milliseconds grace) const {
  return grace + 2 * options_.heartbeat_timeout + std::chrono::seconds(5);
}

int NodeGroup::begin_next_attempt(const StopRecord& stop, std::chrono::milliseconds grace) {
  const auto bound = restart_bound(grace);
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
    forget_torch_keys();
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
        gone.summary =
            cat(node_name(node), " was lost (no heartbeat for ",
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

// The heartbeat thread. Every interval each agent adds 1 to its counter; the
// coordinator checks that every counter moves. It wakes early when its wake
// key is set (a stop, or every node done).
void NodeGroup::watch() {
  const bool coordinator = server_ != nullptr || options_.node_rank < 0;
  const std::string wake = coordinator ? std::string(kCoordinatorWake) : wake_key(id_);
  struct Beat {
    std::int64_t count = -1;
    Clock::time_point changed;
    bool arrived = false;
  };
  std::vector<Beat> beats;  // by node rank in the attempt under way
  std::vector<int> ids;
  std::vector<std::string> hosts;
  bool stop_seen = false;
  int seen_attempt = -1;
  bool seen_in_round = false;
  try {
    while (!quit_) {
      try {
        watch_store_->wait({wake}, options_.heartbeat_interval);
        watch_store_->delete_key(wake);
      } catch (const Timeout&) {
      }
      if (quit_) return;
      if (id_ >= 0) watch_store_->add(heartbeat_key(id_), 1);
      if (elastic() && options_.node_rank < 0 && server_ && !in_round_) {
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
        if (attempt != seen_attempt) stop_seen = false;
        seen_attempt = attempt;
        seen_in_round = in_round;
        {
          std::lock_guard<std::mutex> lock(members_mutex_);
          ids = members_;
          hosts = hosts_;
        }
        // The --hostfile launcher waits for each node to join, unless it
        // closed the round itself (elastic).
        beats.assign(ids.size(), Beat{-1, Clock::now(), options_.node_rank >= 0 || elastic()});
        std::lock_guard<std::mutex> lock(members_mutex_);
        stalled_.clear();
      }
      if (!stop_seen && watch_store_->check({stop_key(attempt)})) {
        stop_seen = true;
        notify();
        // Keep beating while the job may restart: the coordinator must not
        // take a node that stops and starts again for a lost one. The budget
        // is read before the attempt, which changes before the budget does:
        // a restart that has just used the last of it is seen as a restart.
        if (!coordinator && !may_restart() && attempt_ == attempt) return;
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
        for (int id : ids)
          watch_store_->set(wake_key(id), "");
        stop_seen = true;
        notify();
        continue;
      }
      const auto now = Clock::now();
      for (std::size_t node = 0; node < ids.size(); ++node) {
        Beat& beat = beats[node];
        if (ids[node] == id_) continue;
        if (!beat.arrived) {  // the --hostfile launcher waits for each node to join
          beat.arrived = watch_store_->check({node_key(static_cast<int>(node))});
          beat.changed = now;
          continue;
        }
        const std::int64_t count = watch_store_->add(heartbeat_key(ids[node]), 0);
        if (count != beat.count) {
          beat.count = count;
          beat.changed = now;
          continue;
        }
        if (now - beat.changed < options_.heartbeat_timeout) continue;
        if (watch_store_->check({done_key(attempt, static_cast<int>(node))})) continue;
        {
          std::lock_guard<std::mutex> lock(members_mutex_);
          stalled_.insert(ids[node]);  // settle() leaves it out
        }
        if (stop_seen) continue;
        StopRecord lost;
        lost.node = static_cast<int>(node);
        lost.node_lost = true;
        lost.host = node < hosts.size() ? hosts[node] : "";
        lost.summary = cat(node_name(static_cast<int>(node)),
                           " stopped answering: no heartbeat from its cohort run "
                           "for ",
                           seconds(options_.heartbeat_timeout),
                           " (the agent was killed, the node went down, or its network is cut)");
        watch_store_->compare_set(stop_key(attempt), "", lost.encode());
        for (int id : ids)
          watch_store_->set(wake_key(id), "");
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

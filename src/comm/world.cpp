#include <cstdlib>

#include <cohort/errors.hpp>
#include <cohort/world.hpp>

#include "bootstrap/interface_choice.hpp"
#include "bootstrap/master_exchange.hpp"
#include "comm/registry.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/net_interfaces.hpp"
#include "core/secret_file.hpp"
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"
#include "store/inherited_socket.hpp"

namespace cohort {

using detail::cat;

struct World::Impl {
  LaunchInfo info;
  std::unique_ptr<StoreServer> server;  // when this process hosts the store
  std::shared_ptr<Store> store;
  std::chrono::milliseconds timeout{};
  std::int64_t barriers = 0;
  std::string backend_name;  // asked for: InitOptions::backend or COHORT_BACKEND
  std::unique_ptr<Communicator> communicator;

  // Choosing a backend needs no address; only connecting looks one up (a
  // route and maybe a DNS lookup), so backend() stays cheap.
  detail::BackendContext backend_context(bool with_address) {
    detail::BackendContext context;
    context.info = &info;
    context.timeout = timeout;
    context.store = store;
    if (with_address)
      context.address = detail::choose_interface(info, process_environment()).address;
    return context;
  }

  ~Impl() {
    communicator.reset();  // before the store its backend may still use
    if (!server) return;
    // This process hosts the store: the others may still be reading from it
    // (the last barrier's answer, say). Leave once they are gone; a dead
    // peer's connection is closed by its kernel, so this waits only for the living.
    store.reset();
    if (!server->wait_until_idle(timeout)) {
      detail::log(
          detail::LogLevel::warn, "world",
          cat("rank ", info.rank.value, " hosts the store and leaves after ", timeout.count(),
              " ms with ", server->connection_count(), " ranks still connected"));
    }
  }
};

World::World(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
World::World(World&&) noexcept = default;
World& World::operator=(World&&) noexcept = default;
World::~World() = default;

const LaunchInfo& World::info() const noexcept {
  return impl_->info;
}
Store& World::store() noexcept {
  return *impl_->store;
}

std::string_view World::backend() const {
  // Once connected, the one chosen then: the ranks' hosts were known to it.
  if (impl_->communicator) return impl_->communicator->backend();
  return detail::choose_backend(impl_->backend_context(false), impl_->backend_name);
}

Communicator& World::communicator() {
  if (!impl_->communicator) {
    impl_->communicator =
        detail::create_communicator(impl_->backend_context(true), impl_->backend_name);
  }
  return *impl_->communicator;
}

void World::barrier() {
  barrier(impl_->timeout);
}

void World::barrier(std::chrono::milliseconds timeout) {
  if (size() == 1) return;  // nobody to wait for
  // Ranks call barriers in the same order, so the n-th one has the same key
  // everywhere. The last to arrive opens it, and has nobody left to wait for.
  const std::string key = cat("barrier/", ++impl_->barriers);
  const std::int64_t arrived = impl_->store->add(key + "/arrived", 1);
  if (arrived == size()) return impl_->store->set(key + "/open", "");
  try {
    impl_->store->wait({key + "/open"}, timeout);
  } catch (const Timeout&) {
    throw Timeout(cat("barrier ", impl_->barriers, " of rank ", rank(), ": ",
                      impl_->store->add(key + "/arrived", 0), " of ", size(),
                      " ranks arrived within ", timeout.count(), " ms"));
  }
}

namespace {

// Where rank 0's store listens: MASTER_ADDR's own address, so that it is
// reached the way the other ranks were told and no other way; every
// interface only when MASTER_ADDR is not an address of this host (NAT).
std::string rank0_listen_address(const LaunchInfo& info) {
  std::string why;
  std::string address = detail::listen_address_for(info.master_addr.value, &why);
  if (address.empty()) {
    detail::log(detail::LogLevel::warn, "init",
                cat("rank 0 listens on every interface for the store: ", why, " (MASTER_ADDR, ",
                    info.master_addr.source, ")"));
    address = "0.0.0.0";
  }
  return address;
}

}  // namespace

World init(const InitOptions& options) {
  auto impl = std::make_unique<World::Impl>();
  impl->info = detect_launch();
  impl->timeout = options.timeout.count() > 0
                      ? options.timeout
                      : detail::seconds_from_env("COHORT_TIMEOUT", Store::kDefaultTimeout);
  const LaunchInfo& info = impl->info;
  const Environment env = process_environment();

  StoreClient::Options client;
  client.timeout = impl->timeout;
  std::string view = "world";
  int inherited = -1;  // COHORT_STORE_FD, when it is the agent's
  if (auto addr = env.find("COHORT_STORE_ADDR"); addr != env.end()) {
    // Under cohort run: the agent's store, which outlives every worker.
    const auto port = env.find("COHORT_STORE_PORT");
    const auto token = env.find("COHORT_JOB_TOKEN");
    auto number = port == env.end() ? std::nullopt : detail::parse_int(port->second);
    if (!number || *number < 1 || *number > 65535 || token == env.end()) {
      throw LaunchEnvError(cat("COHORT_STORE_ADDR=", addr->second,
                               " is set but COHORT_STORE_PORT or COHORT_JOB_TOKEN is missing or "
                               "wrong: cohort run sets all three; unset the stray one"),
                           {{"COHORT_STORE_ADDR", addr->second},
                            {"COHORT_STORE_PORT", port == env.end() ? "" : port->second}});
    }
    client.host = addr->second;
    client.port = static_cast<int>(*number);
    client.token = token->second;
    client.munge = env.count("COHORT_STORE_MUNGE") != 0;
    if (auto process = env.find("COHORT_STORE_PROCESS"); process != env.end()) {
      client.server_process = process->second;  // set on the store's own host only
    }
    view = cat("attempt_", info.restart_count.value);
    if (auto fd = env.find("COHORT_STORE_FD"); fd != env.end()) {
      inherited = detail::take_inherited_store_socket(fd->second, client.server_process);
    }
  } else if (info.world_size.value == 1) {
    StoreServer::Options server;
    server.host = "127.0.0.1";
    impl->server = std::make_unique<StoreServer>(server);
    client.port = impl->server->port();
  } else if ((info.master_addr.value.empty() || info.master_port.value == 0) &&
             !detail::key_value_service(env).empty()) {
    // mpirun on several nodes (no address) or under MPICH (no job id to
    // derive a port from): rank 0 serves the store on a free port and tells
    // the others, with a fresh secret, through the launcher's key-value
    // service, which only the job's own processes reach.
    detail::MasterAddress mine;
    if (info.rank.value == 0) {
      StoreServer::Options server;
      server.host = !info.master_addr.value.empty() ? rank0_listen_address(info)
                    : info.num_nodes.value == 1     ? "127.0.0.1"
                                                    : detail::choose_interface(info, env).address;
      server.token = detail::random_hex(16);
      server.token_is_secret = true;
      impl->server = std::make_unique<StoreServer>(server);
      mine = {server.host == "0.0.0.0" ? info.master_addr.value : server.host, impl->server->port(),
              server.token};
    }
    const detail::MasterAddress master = detail::exchange_master(info, env, mine);
    const std::string how = cat("from rank 0 through ", detail::key_value_service(env));
    impl->info.master_addr = {master.host, how};
    impl->info.master_port = {master.port, how};
    client.host = master.host;
    client.port = master.port;
    client.token = master.token;
  } else {
    if (info.master_addr.value.empty() || info.master_port.value == 0) {
      throw Error(
          cat("cohort::init: rank ", info.rank.value, " of ", info.world_size.value, " under ",
              to_string(info.launcher.value), " needs the store's address, but ",
              info.master_addr.value.empty() ? "the master address" : "the master port",
              " is not known (",
              info.master_addr.value.empty() ? info.master_addr.source : info.master_port.source,
              "): set MASTER_ADDR and MASTER_PORT, or launch with cohort run"));
    }
    // No agent: rank 0 hosts the store on the master address and port. The
    // token is COHORT_JOB_TOKEN when the user gave the job a secret, else
    // the job id, which keeps jobs apart but is no secret: then only this
    // user's processes on rank 0's host get in, or, under Slurm, processes
    // on other nodes that prove with MUNGE that they run as this user.
    const auto secret = env.find("COHORT_JOB_TOKEN");
    const bool has_secret = secret != env.end() && !secret->second.empty();
    if (const std::string weak = has_secret ? detail::weak_secret(secret->second) : "";
        !weak.empty()) {
      throw LaunchEnvError(cat("COHORT_JOB_TOKEN can be guessed: ", weak, "; make one with ",
                               detail::kMakeASecret, " and give every rank the same"),
                           {{"COHORT_JOB_TOKEN", "(a secret: not shown)"}});
    }
    client.host = info.master_addr.value;
    client.port = info.master_port.value;
    client.token = has_secret ? secret->second : info.job_id.value;
    client.munge = !has_secret && detail::launcher_entry(info.launcher.value).store_proof ==
                                      detail::StoreProof::munge;
    if (info.rank.value == 0) {
      StoreServer::Options server;
      server.host = rank0_listen_address(info);
      server.port = info.master_port.value;
      server.token = client.token;
      server.token_is_secret = has_secret;
      server.munge = client.munge;
      impl->server = std::make_unique<StoreServer>(server);
    }
  }
  // The rank that serves the store reaches it without TCP or a handshake.
  std::shared_ptr<Store> store = impl->server ? impl->server->connect_in_process(client.timeout)
                                 : inherited >= 0
                                     ? StoreClient::over_trusted_socket(client, inherited)
                                     : std::make_shared<StoreClient>(client);
  impl->store = std::make_shared<PrefixStore>(view, std::move(store));
  if (!options.backend.empty()) {
    impl->backend_name = options.backend;
  } else if (auto name = env.find("COHORT_BACKEND"); name != env.end()) {
    impl->backend_name = name->second;
  }
  return World(std::move(impl));
}

}  // namespace cohort

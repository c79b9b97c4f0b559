#include "launch/node_plan.hpp"

#include <algorithm>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cohort/errors.hpp>

#include "bootstrap/interface_choice.hpp"
#include "bootstrap/master_exchange.hpp"
#include "core/log.hpp"
#include "core/net_interfaces.hpp"
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"
#include "launch/user_secret.hpp"

namespace cohort::detail {
namespace {

constexpr int kDefaultRendezvousPort = 29500;

std::string value_of(const Environment& env, const char* name) {
  auto found = env.find(name);
  return found == env.end() ? std::string() : found->second;
}

// The GPUs Slurm gave this node, if GPUs were requested at all.
std::optional<std::string> gpu_request(const Environment& env) {
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE",
                           "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK"}) {
    const std::string value = value_of(env, name);
    if (!value.empty()) return cat(name, "=", value);
  }
  return std::nullopt;
}

// The commands that work for this geometry, for refusals.
std::string working_forms(const LaunchInfo& outer, int nproc) {
  const int per_node = outer.local_world_size.value > 0 ? outer.local_world_size.value : 1;
  const int nodes = outer.num_nodes.value > 0 ? outer.num_nodes.value
                                              : std::max(1, outer.world_size.value / per_node);
  const LauncherEntry& launcher = launcher_entry(outer.launcher.value);
  return launcher.working_forms != nullptr ? launcher.working_forms(nodes, per_node * nproc) : "";
}

// The IPv4 address `host` names, or "" when it does not resolve.
std::string resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return "";
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof(text));
  freeaddrinfo(found);
  return text;
}

bool is_loopback(const std::string& host) {
  return host == "::1" || host == "[::1]" || resolve_ipv4(host).rfind("127.", 0) == 0;
}

// Where a store served for `host` listens: that address when it is this
// host's, else every interface (behind NAT), said once.
std::string listen_address(const std::string& host) {
  std::string why;
  std::string address = listen_address_for(host, &why);
  if (!address.empty()) return address;
  log(LogLevel::info, "run", cat("the store listens on every interface: ", why));
  return "0.0.0.0";
}

// The user's secret (--token-file, COHORT_JOB_TOKEN), when there is one,
// replaces a token derived from the job.
void use_secret(NodeGroupOptions& group, const RunOptions& options) {
  if (options.job_token.empty()) return;
  group.token = options.job_token;
  group.token_is_secret = true;
  group.munge = false;
}

void check_geometry(const RunOptions& options, const LaunchInfo& outer, const Environment& env) {
  const int nproc = options.nproc_per_node;
  const int tasks_here = outer.local_world_size.value;
  const std::string launcher(to_string(outer.launcher.value));
  if (nproc > 1 && tasks_here != 1) {
    const std::string counts = value_of(env, "SLURM_STEP_TASKS_PER_NODE");
    throw InvalidArgument(
        cat("cohort run: ", launcher, " started ",
            tasks_here > 1 ? cat(tasks_here, " tasks on this node")
                           : std::string("tasks whose layout is unknown"),
            counts.empty() ? "" : cat(" (SLURM_STEP_TASKS_PER_NODE=", counts, ")"),
            " and each would start -n ", nproc, " workers",
            tasks_here > 1
                ? cat(": ", tasks_here * nproc, " workers per node, probably not what you meant")
                : std::string(),
            ". ", working_forms(outer, nproc)));
  }
  const int gpus = gpus_in_environment(env);
  if (auto request = gpu_request(env); request && gpus >= 0 && nproc > gpus) {
    throw InvalidArgument(cat("cohort run: -n ", nproc, " workers but Slurm gave this node ", gpus,
                              " GPU", gpus == 1 ? "" : "s", " (", *request,
                              "): ask for as many GPUs as workers (--gpus-per-node=", nproc,
                              "), or start fewer workers. ", working_forms(outer, nproc)));
  }
  if (options.nnodes > 1 && options.nnodes != outer.world_size.value &&
      options.nnodes != outer.num_nodes.value) {
    throw InvalidArgument(
        cat("cohort run: --nnodes ", options.nnodes, " but ", launcher, " started ",
            outer.world_size.value, " tasks (", outer.world_size.source, ") on ",
            outer.num_nodes.value > 0 ? cat(outer.num_nodes.value) : "?",
            " nodes: drop --nnodes (cohort run takes the layout from ", launcher, ") or fix it"));
  }
}

// One agent per task of srun or mpirun.
void plan_under_launcher(AgentPlan& plan, const RunOptions& options, const LaunchInfo& outer,
                         const Environment& env) {
  const LauncherEntry& launcher = launcher_entry(outer.launcher.value);
  if (launcher.agents == AgentForm::refused) {
    throw InvalidArgument(
        cat("cohort run: started as rank ", outer.rank.value, " of ", outer.world_size.value,
            " by ", launcher.name, " (", outer.world_size.source,
            "): every copy would start its own workers. Start one cohort run per node instead, "
            "with --nnodes and --node-rank, or with --hostfile"));
  }
  check_geometry(options, outer, env);
  NodeGroupOptions& group = plan.group;
  group.nnodes = outer.world_size.value;
  group.node_rank = outer.rank.value;
  group.serve_store = outer.rank.value == 0;
  const int tasks_here = outer.local_world_size.value;
  plan.one_worker_per_task = options.nproc_per_node == 1;
  group.unit = tasks_here == 1 ? "node" : "task";
  if (launcher.agents == AgentForm::job_step) {
    plan.node_name = AgentPlan::NodeName::launcher_node;
    plan.launcher_node = outer.node_rank.value;
    group.store_host = options.rdzv_host.empty() ? outer.master_addr.value : options.rdzv_host;
    group.store_port = options.rdzv_port != 0     ? options.rdzv_port
                       : options.master_port != 0 ? options.master_port
                                                  : outer.master_port.value;
    if (group.store_host.empty() || group.store_port == 0) {
      throw InvalidArgument(
          cat("cohort run: task ", outer.rank.value, " of a Slurm step cannot find node 0: ",
              group.store_host.empty() ? outer.master_addr.source : outer.master_port.source));
    }
    group.bind_host = listen_address(group.store_host);
    group.store_node = 0;
    if (!options.rdzv_host.empty()) {
      // --rdzv-endpoint names the host: whichever agent runs there serves.
      group.store_node.reset();
      group.serve_store = false;
      group.bind_host = resolve_ipv4(options.rdzv_host);
      group.serve_if_bindable = !group.bind_host.empty();
    }
    plan.master_addr = outer.master_addr.value;  // rank 0 runs on the step's first host
    // The job's id keeps jobs apart but is no secret: agents and workers on
    // other nodes prove with MUNGE that they run as this user, unless the
    // user gave the job a secret.
    group.token = cat("slurm:", outer.job_id.value, ":", group.store_port);
    group.munge = launcher.store_proof == StoreProof::munge;
    use_secret(group, options);
    const std::string nodelist = value_of(env, "SLURM_STEP_NODELIST");
    if (!nodelist.empty() && tasks_here == 1) {
      try {
        group.node_hosts = hostlist::expand(nodelist);
      } catch (const InvalidArgument&) {  // only for messages: detection already checked it
      }
    }
    return;
  }
  // Open MPI or MPICH: rank 0's agent serves the store on a free port and
  // tells the others through the launcher's key-value service.
  plan.node_name = AgentPlan::NodeName::host;
  const bool one_node = outer.num_nodes.value == 1;
  group.token = cat(launcher.name, ":", outer.job_id.value);
  if (!key_value_service(env).empty()) {
    group.bind_host = one_node ? "127.0.0.1" : choose_interface(outer, env).address;
    group.store_host = group.bind_host;
    group.store_port = 0;
    // A fresh secret, handed out through the launcher's key-value service,
    // which only the job's own processes reach.
    group.token = random_hex(16);
    group.token_is_secret = true;
    plan.used_mpi_service = true;
    group.exchange = [outer, env](const StoreAddress& mine) {
      const MasterAddress master = exchange_master(outer, env, {mine.host, mine.port, mine.token});
      return StoreAddress{master.host, master.port, master.token};
    };
    return;
  }
  if (outer.master_addr.value.empty() || outer.master_port.value == 0) {
    throw InvalidArgument(
        cat("cohort run: rank ", outer.rank.value, " of ", outer.world_size.value, " under ",
            launcher.name,
            " cannot find rank 0's agent: no key-value service (PMI_FD, "
            "PMIX_NAMESPACE) and ",
            outer.master_addr.value.empty() ? outer.master_addr.source : outer.master_port.source,
            ": set MASTER_ADDR and MASTER_PORT (mpirun -x MASTER_ADDR -x MASTER_PORT)"));
  }
  group.store_host = outer.master_addr.value;
  group.store_port = outer.master_port.value;
  group.bind_host = listen_address(group.store_host);
  use_secret(group, options);
}

}  // namespace

int gpus_in_environment(const Environment& env) {
  if (auto visible = env.find("CUDA_VISIBLE_DEVICES"); visible != env.end()) {
    int count = 0;
    std::size_t start = 0;
    const std::string& list = visible->second;
    while (start < list.size()) {
      const std::size_t end = std::min(list.find(',', start), list.size());
      count += end > start;
      start = end + 1;
    }
    return count;
  }
  if (auto count = parse_int(value_of(env, "SLURM_GPUS_ON_NODE"))) return static_cast<int>(*count);
  return -1;
}

AgentPlan plan_agent(const RunOptions& options, const AgentRole& role, const LaunchInfo& outer,
                     const Environment& env) {
  AgentPlan plan;
  NodeGroupOptions& group = plan.group;
  group.rendezvous_timeout = options.rendezvous_timeout;
  group.heartbeat_timeout = options.heartbeat_timeout;
  group.trace = !options.trace.empty();
  group.min_nodes = options.min_nodes;
  group.last_call = options.last_call;
  group.node_hosts = role.node_hosts;
  group.torch_port = options.agent_store ? 0 : -1;
  const bool under_launcher = options.node_rank < 0 && outer.world_size.value > 1 &&
                              launcher_entry(outer.launcher.value).agents != AgentForm::alone;
  if (under_launcher) {
    plan_under_launcher(plan, options, outer, env);
    return plan;
  }
  if (options.nnodes < 1 || options.node_rank >= options.nnodes ||
      (options.nnodes == 1 && options.node_rank > 0)) {
    throw InvalidArgument(cat("cohort run: --node-rank ", options.node_rank,
                              " must be from 0 to --nnodes - 1 (--nnodes is ", options.nnodes,
                              ")"));
  }
  if (options.nnodes == 1) {
    // One node: the store is private to this machine, on a free port; the
    // workers' MASTER_ADDR:MASTER_PORT is where the agent serves PyTorch's.
    group.node_rank = 0;
    group.bind_host = "127.0.0.1";
    group.token = random_hex(16);
    group.token_is_secret = true;
    group.torch_host = options.master_addr;
    if (options.agent_store) group.torch_port = options.master_port;
    plan.master_addr = options.master_addr;
    return plan;
  }
  group.nnodes = options.nnodes;
  group.store_host = options.rdzv_host.empty() ? options.master_addr : options.rdzv_host;
  group.store_port = options.rdzv_port != 0 ? options.rdzv_port : kDefaultRendezvousPort;
  group.token = cat("cohort:", group.store_host, ":", group.store_port);
  use_secret(group, options);
  if (!group.token_is_secret && !is_loopback(group.store_host)) {
    // A job on several hosts needs a secret, or anyone who can reach the
    // port could join or stop it. None given: this user's own, which every
    // node with the same home directory reads alike (ssh's and MUNGE's way).
    if (!options.insecure) {
      const UserSecret secret = user_secret();
      group.token = secret.token;
      group.token_source = secret.path;
    }
    group.token_is_secret = true;  // --insecure: as told, any peer that knows the token gets in
  }
  if (options.node_rank >= 0) {
    // torchrun's static form: node 0 serves (unless whoever started the
    // agents does: --hostfile), and its address is everyone's MASTER_ADDR.
    group.node_rank = options.node_rank;
    group.serve_store = options.node_rank == 0 && !role.store_served_elsewhere;
    group.store_node = role.store_served_elsewhere ? -1 : 0;
    group.bind_host = listen_address(group.store_host);
    plan.master_addr = options.master_addr;
    return plan;
  }
  // torchrun's c10d form: the agent that can bind the endpoint serves it.
  group.node_rank = kNodeRankAtJoin;
  group.serve_store = false;
  group.bind_host = resolve_ipv4(group.store_host);
  group.serve_if_bindable = !group.bind_host.empty();
  return plan;
}

std::optional<std::vector<std::string>> srun_for_allocation(
    const Environment& env, const std::vector<std::string>& self_argv) {
  if (value_of(env, "SLURM_JOB_ID").empty()) return std::nullopt;
  for (const char* step : {"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS"}) {
    if (!value_of(env, step).empty()) return std::nullopt;
  }
  // mpirun's ranks inside an sbatch job carry the job's variables too.
  for (const char* mpi : {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK"}) {
    if (!value_of(env, mpi).empty()) return std::nullopt;
  }
  const auto nodes = parse_int(value_of(env, "SLURM_JOB_NUM_NODES"));
  if (!nodes || *nodes < 2) return std::nullopt;
  std::vector<std::string> argv{"srun",
                                cat("--nodes=", *nodes),
                                cat("--ntasks=", *nodes),
                                "--ntasks-per-node=1",
                                "--kill-on-bad-exit=0",
                                "--unbuffered"};
  argv.insert(argv.end(), self_argv.begin(), self_argv.end());
  return argv;
}

}  // namespace cohort::detail

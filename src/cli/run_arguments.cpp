#include "cli/run_arguments.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <cohort/errors.hpp>

#include "cli/token_file.hpp"
#include "core/secret_file.hpp"
#include "core/strings.hpp"
#include "launch/gpu_placement.hpp"
#include "launch/ssh_launch.hpp"

namespace cohort::cli {
namespace {

using detail::cat;
using Kind = OptionSpec::Kind;

// torchrun's default port of a c10d endpoint (the static form's, 29500, is
// node_plan's).
constexpr int kEndpointPort = 29400;

constexpr std::array kOptions = {
    // --- workers
    OptionSpec{"-n,--nproc-per-node,--nproc_per_node", "--nproc-per-node", "PET_NPROC_PER_NODE",
               Kind::value,
               "workers: a number, auto (GPUs, else CPUs), cpu or gpu (default 1); per node with "
               "--nnodes, --hostfile, --hosts, or under srun/mpirun with one task per node"},
    OptionSpec{"--python", "--python", "PET_PYTHON", Kind::value,
               "interpreter for a .py PROGRAM, -m, --run-path (default python3)"},
    OptionSpec{"-m,--module", "--module", "PET_MODULE", Kind::flag,
               "PROGRAM is a Python module: python -m PROGRAM (torchrun -m)"},
    OptionSpec{"--no-python,--no_python", "--no-python", "PET_NO_PYTHON", Kind::flag,
               "run PROGRAM as it is, even a .py (torchrun --no-python)"},
    OptionSpec{"--run-path,--run_path", "--run-path", "PET_RUN_PATH", Kind::flag,
               "run PROGRAM with python whatever its name (torchrun --run-path)"},
    OptionSpec{"--local-rank-arg,--local_rank_arg", "--local-rank-arg", "PET_LOCAL_RANK_ARG",
               Kind::optional,
               "append the local rank to the arguments: --local_rank=N (torch.distributed.launch "
               "of PyTorch 1.x), or with =dash --local-rank=N (2.x)",
               "underscore"},
    OptionSpec{"--use-env,--use_env", "--use-env", "PET_USE_ENV", Kind::flag,
               "torch.distributed.launch's: read the local rank from LOCAL_RANK, which is "
               "cohort's default"},
    OptionSpec{"--gpus-per-proc,--gpus_per_proc", "--gpus-per-proc", "PET_GPUS_PER_PROC",
               Kind::value,
               "give each worker N GPUs of its own: CUDA_VISIBLE_DEVICES is its slice of what "
               "the node allows (default: every worker sees them all, as under torchrun)"},
    OptionSpec{"--cpu-bind,--cpu_bind", "--cpu-bind", "PET_CPU_BIND", Kind::value,
               "bind each worker's CPUs: none (default), numa (the NUMA node of its GPU), gpu "
               "(the CPUs near its GPU) or cores (a fair share of this task's CPUs)"},
    OptionSpec{"--role", "--role", "PET_ROLE", Kind::value, "ROLE_NAME of the workers (default)"},
    OptionSpec{"--max-restarts,--max_restarts", "--max-restarts", "PET_MAX_RESTARTS", Kind::value,
               "restart all workers up to N times after a failure (default 0)"},
    OptionSpec{"--grace", "--grace", "PET_GRACE", Kind::value,
               "seconds between SIGTERM and SIGKILL when stopping workers (default 5)"},
    OptionSpec{"--timeout", "--timeout", "PET_TIMEOUT", Kind::value,
               "seconds the whole job may run (restarts included); past them every worker is "
               "stopped, the report says what each rank printed last, and the exit status is "
               "124 (as mpirun --timeout)"},
    OptionSpec{"--signals,--signals-to-handle,--signals_to_handle", "--signals", "PET_SIGNALS",
               Kind::value,
               "signals passed on to workers (default TERM,INT,HUP,QUIT,USR1,USR2); TERM INT HUP "
               "QUIT also stop the job"},
    OptionSpec{"--no-agent-store,--no_agent_store", "--no-agent-store", "PET_NO_AGENT_STORE",
               Kind::flag,
               "MASTER_PORT is rank 0's to bind (TORCHELASTIC_USE_AGENT_STORE=False), instead of "
               "the agent's store speaking PyTorch's TCPStore protocol"},
    OptionSpec{"--monitor-interval,--monitor_interval", "--monitor-interval",
               "PET_MONITOR_INTERVAL", Kind::value,
               "accepted for torchrun: cohort sees a worker's exit at once"},
    OptionSpec{"--start-method,--start_method", "--start-method", "PET_START_METHOD", Kind::value,
               "accepted for torchrun (spawn, fork, forkserver): workers are always new processes"},
    // --- output
    OptionSpec{"--log-dir,--log_dir", "--log-dir", "PET_LOG_DIR", Kind::value,
               "also write each rank's output to DIR/attempt_K/rank_R/{stdout,stderr}.log"},
    OptionSpec{"--trace", "--trace", "PET_TRACE", Kind::value,
               "write the job's timeline to FILE: every node and rank, attempts, stops and why "
               "(Chrome trace-event JSON: open it in ui.perfetto.dev or chrome://tracing)"},
    OptionSpec{"-r,--redirects", "--redirects", "PET_REDIRECTS", Kind::value,
               "streams that go to the log files only: 1 stdout, 2 stderr, 3 both; for every local "
               "rank (3) or some (0:3,1:2)"},
    OptionSpec{"-t,--tee", "--tee", "PET_TEE", Kind::value,
               "streams that go to the console and the log files, as --redirects"},
    OptionSpec{"--local-ranks-filter,--local_ranks_filter", "--local-ranks-filter",
               "PET_LOCAL_RANKS_FILTER", Kind::value,
               "local ranks whose output reaches the console, e.g. 0 or 0,1"},
    OptionSpec{"--ranks", "--ranks", "PET_RANKS", Kind::value,
               "ranks whose output reaches the console, e.g. 0 or 0,2-3 (log files get all)"},
    OptionSpec{"--prefix", "--prefix", "PET_PREFIX", Kind::value,
               "console line prefix with {rank} {local_rank} {host} (default '[{rank}] ' with more "
               "than one worker)"},
    OptionSpec{"--no-prefix,--no_prefix", "--no-prefix", "PET_NO_PREFIX", Kind::flag,
               "no console line prefix"},
    OptionSpec{"--logs-specs,--logs_specs", "--logs-specs", "PET_LOGS_SPECS", Kind::value,
               "torchrun's log plugin: only its default is accepted (use --log-dir, --redirects, "
               "--tee)"},
    // torchrun's newer than 2.6 (2.7 to 2.11): accepted where there is nothing
    // to do, refused with a line where cohort does not do it (yet).
    OptionSpec{"--event-log-handler,--event_log_handler", "--event-log-handler",
               "PET_EVENT_LOG_HANDLER", Kind::value,
               "torchrun's event log plugin: null and console are accepted (cohort's events are "
               "its report)"},
    OptionSpec{"--duplicate-stdout-filters,--duplicate_stdout_filters",
               "--duplicate-stdout-filters", "PET_DUPLICATE_STDOUT_FILTERS", Kind::value,
               "refused: torchrun's copy of filtered output to a file (use --log-dir)"},
    OptionSpec{"--duplicate-stderr-filters,--duplicate_stderr_filters",
               "--duplicate-stderr-filters", "PET_DUPLICATE_STDERR_FILTERS", Kind::value,
               "refused, as --duplicate-stdout-filters"},
    OptionSpec{"--numa-binding,--numa_binding", "--numa-binding", "PET_NUMA_BINDING", Kind::value,
               "refused: cohort does not bind workers to NUMA nodes yet (numactl in PROGRAM)"},
    OptionSpec{"--virtual-local-rank,--virtual_local_rank", "--virtual-local-rank",
               "PET_VIRTUAL_LOCAL_RANK", Kind::flag,
               "refused: torchrun's LOCAL_RANK=0 with one GPU visible per worker"},
    // --- one node, several nodes
    OptionSpec{"--standalone", "--standalone", "PET_STANDALONE", Kind::flag,
               "one node, the store on a free port (the default on one node)"},
    OptionSpec{"--nnodes", "--nnodes", "PET_NNODES", Kind::value,
               "nodes in the job, one cohort run on each (default 1; under srun or mpirun: what "
               "the launcher started); MIN:MAX: elastic, the job goes on with MIN to MAX nodes"},
    OptionSpec{"--node-rank,--node_rank", "--node-rank", "PET_NODE_RANK", Kind::value,
               "this node's rank, 0 to nnodes-1; without it, with --nnodes, ranks are given at "
               "the rendezvous"},
    OptionSpec{"--master-addr,--master_addr", "--master-addr", "PET_MASTER_ADDR", Kind::value,
               "MASTER_ADDR on one node (default 127.0.0.1); with --nnodes, node 0's address, "
               "where the agents meet"},
    OptionSpec{"--master-port,--master_port", "--master-port", "PET_MASTER_PORT", Kind::value,
               "MASTER_PORT on one node (default: a free port); with --nnodes, the port node 0's "
               "agent serves the job's store on (default 29500)"},
    OptionSpec{"--rdzv-backend,--rdzv_backend", "--rdzv-backend", "PET_RDZV_BACKEND", Kind::value,
               "c10d or static: cohort's store serves either (etcd is not needed)"},
    OptionSpec{"--rdzv-endpoint,--rdzv_endpoint", "--rdzv-endpoint", "PET_RDZV_ENDPOINT",
               Kind::value,
               "HOST[:PORT] where the agents meet (default port 29400); the agent on HOST serves "
               "the store"},
    OptionSpec{"--rdzv-id,--rdzv_id", "--rdzv-id", "PET_RDZV_ID", Kind::value,
               "the job's id: TORCHELASTIC_RUN_ID and COHORT_RUN_ID on every node"},
    OptionSpec{"--rdzv-conf,--rdzv_conf", "--rdzv-conf", "PET_RDZV_CONF", Kind::value,
               "torchrun's key=value list: timeout and join_timeout (seconds the nodes wait for "
               "each other), last_call_timeout (with --nnodes MIN:MAX, seconds the first "
               "rendezvous waits for more than MIN nodes, default 10), read_timeout (seconds a "
               "store call may take)"},
    OptionSpec{"--rdzv-timeout,--rdzv_timeout", "--rdzv-timeout", "PET_RDZV_TIMEOUT", Kind::value,
               "seconds the nodes wait for each other at start (default 300)"},
    OptionSpec{"--heartbeat-timeout,--heartbeat_timeout", "--heartbeat-timeout",
               "PET_HEARTBEAT_TIMEOUT", Kind::value,
               "seconds without a heartbeat after which a node counts as lost and the job stops "
               "(default 10)"},
    OptionSpec{"--local-addr,--local_addr", "--local-addr", "PET_LOCAL_ADDR", Kind::value,
               "this node's name in reports and prefixes (default: its host name)"},
    OptionSpec{"--run-id,--run_id", "--run-id", "PET_RUN_ID", Kind::value,
               "COHORT_RUN_ID and TORCHELASTIC_RUN_ID for the workers (default: random)"},
    OptionSpec{"--no-srun,--no_srun", "--no-srun", "PET_NO_SRUN", Kind::flag,
               "inside a Slurm allocation of several nodes, run on this node only instead of "
               "starting one agent per node with srun"},
    OptionSpec{"--token-file,--token_file", "--token-file", "PET_TOKEN_FILE", Kind::value,
               "the job's secret: the first line of FILE, which only you may read, the same on "
               "every node (- reads it from standard input; also COHORT_JOB_TOKEN). Needed when "
               "the store is reached from other hosts and neither Slurm nor mpirun vouches for "
               "them"},
    OptionSpec{"--insecure", "--insecure", "PET_INSECURE", Kind::flag,
               "run across hosts without a secret: anyone who reaches the store's port and "
               "guesses its token can join or stop the job"},
    // --- many hosts over ssh
    OptionSpec{"--hostfile", "--hostfile", "PET_HOSTFILE", Kind::value,
               "start one agent per host over ssh: lines `host [slots=N]`; -n, when given, "
               "applies to every host instead of its slots"},
    OptionSpec{"--hosts", "--hosts", "PET_HOSTS", Kind::value, "the same as a list: h1:2,h2:2"},
    OptionSpec{"--ssh", "--ssh", "PET_SSH", Kind::value,
               "how to reach the hosts (default ssh; e.g. \"ssh -p 2222\"; also COHORT_SSH)"},
    OptionSpec{"--env", "--env", "PET_ENV", Kind::repeated,
               "pass this environment variable on to the hosts (repeatable)"},
    OptionSpec{"--env-prefix,--env_prefix", "--env-prefix", "PET_ENV_PREFIX", Kind::repeated,
               "pass every variable starting with this on to the hosts, e.g. NCCL_ (repeatable)"},
    OptionSpec{"--remote-cohort,--remote_cohort", "--remote-cohort", "PET_REMOTE_COHORT",
               Kind::value, "cohort's path on the hosts (default: this one's)"},
};

const OptionSpec& spec_of(std::string_view canonical) {
  for (const OptionSpec& spec : kOptions) {
    if (spec.canonical == canonical) return spec;
  }
  throw std::logic_error(cat("no option ", canonical));
}

std::vector<std::string> split(const std::string& text, const char* separators) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find_first_of(separators, start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// An option's value with what to call it in an error.
struct Given {
  std::string value;
  std::string origin;  // "--nproc-per-node" or "PET_NPROC_PER_NODE"
  explicit operator bool() const { return !origin.empty(); }
};

Given get(const RunArguments& arguments, std::string_view canonical) {
  const Setting* setting = arguments.find(canonical);
  if (setting == nullptr || setting->values.empty()) return {};
  return {setting->values.back(), setting->origin};
}

[[noreturn]] void bad(const Given& given, const std::string& expected) {
  throw InvalidArgument(cat(given.origin, " '", given.value, "': ", expected));
}

bool truth(const Given& given) {
  std::string value = given.value;
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off" || value.empty()) {
    return false;
  }
  bad(given, "expected 1 or 0 (true or false)");
}

int integer(const Given& given, int low, int high, const std::string& expected) {
  auto number = detail::parse_int(given.value);
  if (!number || *number < low || *number > high) bad(given, expected);
  return static_cast<int>(*number);
}

std::chrono::milliseconds seconds(const Given& given, double low, double high) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(given.value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != given.value.size() || !(value >= low) || value > high) {
    bad(given, cat("expected seconds from ", low, " to ", high));
  }
  return std::chrono::milliseconds(std::llround(value * 1000));
}

// -n N|auto|cpu|gpu, as torchrun: auto is the GPU count, else the CPU count.
int parse_nproc(const Given& given, const HostCounts& host) {
  if (given.value == "cpu") return host.cpus();
  if (given.value == "gpu" || given.value == "auto") {
    if (const int gpus = host.gpus(); gpus > 0) return gpus;
    if (given.value == "gpu") {
      bad(given,
          "no GPU here (none in sysfs, or CUDA_VISIBLE_DEVICES or Slurm's allocation allows "
          "none: `cohort env` shows which); give a number instead");
    }
    return host.cpus();
  }
  return integer(given, 1, 4096, "expected a number from 1 to 4096, auto, cpu or gpu");
}

// "0,2-3" -> {0, 2, 3}. A console shows a bounded number of ranks: more
// would also make a command line of megabytes for the other nodes' agents.
std::set<int> parse_rank_list(const Given& given) {
  constexpr std::int64_t kMaxRanks = 65536;
  std::set<int> ranks;
  std::int64_t named = 0;
  for (const std::string& item : split(given.value, ",")) {
    const std::size_t dash = item.find('-', 1);
    auto low = detail::parse_int(item.substr(0, dash));
    auto high = dash == std::string::npos ? low : detail::parse_int(item.substr(dash + 1));
    if (!low || !high || *low < 0 || *high < *low || *high > INT_MAX) {
      bad(given, cat("'", item, "' is not a rank or range of ranks"));
    }
    named += *high - *low + 1;
    if (named > kMaxRanks) {
      bad(given, cat("names more than ", kMaxRanks,
                     " ranks; leave it out to show every rank, or use --log-dir"));
    }
    for (auto rank = *low; rank <= *high; ++rank)
      ranks.insert(static_cast<int>(rank));
  }
  if (ranks.empty()) bad(given, "expected ranks, e.g. 0 or 0,2-3");
  return ranks;
}

// --nnodes N, or torchrun's MIN:MAX (elastic membership when MIN < MAX).
void parse_nnodes(const Given& given, RunOptions& options) {
  const std::size_t colon = given.value.find(':');
  auto low = detail::parse_int(given.value.substr(0, colon));
  auto high = colon == std::string::npos ? low : detail::parse_int(given.value.substr(colon + 1));
  if (!low || !high || *low < 1 || *high > 100000 || *high < *low) {
    bad(given, "expected a number of nodes, or MIN:MAX with 1 <= MIN <= MAX");
  }
  options.nnodes = static_cast<int>(*high);
  options.min_nodes = *low < *high ? static_cast<int>(*low) : 0;
}

// HOST[:PORT] or [IPV6]:PORT.
std::pair<std::string, int> parse_endpoint(const Given& given) {
  std::string host = given.value;
  int port = kEndpointPort;
  const std::size_t colon = host.rfind(':');
  const bool bracketed = !host.empty() && host.front() == '[';
  if (colon != std::string::npos && (!bracketed || colon > host.find(']'))) {
    Given port_text{host.substr(colon + 1), given.origin};
    port = integer(port_text, 1, 65535, "expected HOST[:PORT] with a port from 1 to 65535");
    host = host.substr(0, colon);
  }
  if (bracketed && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) bad(given, "expected HOST[:PORT]");
  return {host, port};
}

void apply_rdzv_conf(const Given& given, RunOptions& options) {
  // torchrun's keys; those that tune nothing here are accepted and documented.
  static const std::set<std::string> kNothingToTune = {
      "close_timeout",          "is_host",   "use_libuv", "keep_alive_interval",
      "keep_alive_max_attempt", "store_type"};
  for (const std::string& item : split(given.value, ",")) {
    const std::size_t equals = item.find('=');
    const std::string key = item.substr(0, equals);
    if (equals == std::string::npos) bad(given, cat("'", item, "' is not key=value"));
    const Given value{item.substr(equals + 1), cat(given.origin, " ", key)};
    if (key == "timeout" || key == "join_timeout") {
      options.rendezvous_timeout = seconds(value, 0.001, 86400 * 7);
    } else if (key == "last_call_timeout") {
      options.last_call = seconds(value, 0, 86400);
    } else if (key == "read_timeout") {
      options.heartbeat_timeout = seconds(value, 0.001, 86400);
    } else if (kNothingToTune.count(key) == 0) {
      bad(given, cat("unknown key '", key,
                     "' (cohort reads timeout, join_timeout, last_call_timeout and read_timeout, "
                     "and accepts close_timeout, is_host, use_libuv, keep_alive_interval, "
                     "keep_alive_max_attempt, store_type)"));
    }
  }
}

std::string current_directory_file(const std::string& path, const std::string& origin) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw InvalidArgument(cat(origin, " ", path,
                              ": is a directory; give the file that lists "
                              "the hosts, one `host [slots=N]` per line"));
  }
  std::ifstream file(path);
  if (!file) {
    throw InvalidArgument(cat(origin, " ", path, ": cannot read it (", std::strerror(errno), ")"));
  }
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Several hosts over ssh, several nodes by flags or at the rendezvous, or one.
void place(const RunArguments& arguments, RunOptions& options,
           const std::function<const char*(const char*)>& getenv) {
  const Given hostfile = get(arguments, "--hostfile");
  const Given hosts = get(arguments, "--hosts");
  const Given ssh = get(arguments, "--ssh");
  if (hostfile || hosts) {
    if (hostfile && hosts) {
      throw InvalidArgument(cat("give ", hostfile.origin, " or ", hosts.origin, ", not both"));
    }
    options.hosts =
        hosts ? detail::parse_host_list(hosts.value)
              : detail::parse_hostfile(current_directory_file(hostfile.value, hostfile.origin),
                                       hostfile.value);
    if (const Given nnodes = get(arguments, "--nnodes")) {
      // Elastic over ssh: MAX is the hosts given; the job goes on with MIN.
      parse_nnodes(nnodes, options);
      if (options.nnodes != static_cast<int>(options.hosts.size())) {
        bad(nnodes, cat("the job's nodes are the ", options.hosts.size(), " hosts of ",
                        (hostfile ? hostfile : hosts).origin,
                        ": give --nnodes MIN:", options.hosts.size(), ", or leave it out"));
      }
      options.nnodes = 1;  // the launcher itself runs no workers
    }
    // -n given: that many on every host; else each host's slots (1 when none).
    for (RunOptions::Host& host : options.hosts) {
      if (arguments.given("--nproc-per-node")) host.slots = 0;
    }
    if (ssh) options.ssh = ssh.value;
    for (const char* name : {"--env", "--env-prefix"}) {
      if (const Setting* setting = arguments.find(name)) {
        auto& target =
            std::string_view(name) == "--env" ? options.forward_env : options.forward_env_prefixes;
        target = setting->values;
      }
    }
    if (const Given remote = get(arguments, "--remote-cohort"))
      options.remote_cohort = remote.value;
    return;
  }
  if (const Given nnodes = get(arguments, "--nnodes")) parse_nnodes(nnodes, options);
  if (const Given node_rank = get(arguments, "--node-rank")) {
    options.node_rank = integer(node_rank, 0, 100000, "expected a node rank, 0 or more");
    if (options.node_rank >= options.nnodes) {
      bad(node_rank, cat("must be less than --nnodes (", options.nnodes, ")"));
    }
  }
  const Given standalone =
      arguments.flag("--standalone") ? get(arguments, "--standalone") : Given{};
  if (standalone && options.nnodes > 1) {
    throw InvalidArgument(cat(standalone.origin, " runs one node, but --nnodes is ", options.nnodes,
                              ": drop one of them"));
  }
  if (const Given endpoint = get(arguments, "--rdzv-endpoint")) {
    const auto [host, port] = parse_endpoint(endpoint);
    options.rdzv_host = host;
    options.rdzv_port = port;
    // On one node the endpoint changes nothing: the store stays on loopback.
    if (options.nnodes > 1 && !arguments.given("--master-addr")) options.master_addr = host;
  }
  if (options.nnodes > 1 || options.node_rank >= 0) {
    // Several nodes by flags: --master-addr/--master-port is where the agents
    // meet (torchrun's static form; port 0: 29500, or under srun the job's
    // own); the workers' MASTER_PORT is node 0's.
    if (options.rdzv_port == 0) options.rdzv_port = options.master_port;
    options.master_port = 0;
  }
  if (const Given file = get(arguments, "--token-file")) {
    options.job_token = detail::read_token_file(file.value);
  } else if (const char* token = getenv("COHORT_JOB_TOKEN"); token != nullptr && *token != 0) {
    if (const std::string weak = detail::weak_secret(token); !weak.empty()) {
      throw InvalidArgument(cat("COHORT_JOB_TOKEN can be guessed: ", weak, "; make one with ",
                                detail::kMakeASecret, " (or use --token-file FILE)"));
    }
    options.job_token = token;
  }
  options.insecure = arguments.flag("--insecure");
}

}  // namespace

std::span<const OptionSpec> run_option_table() {
  return kOptions;
}

std::vector<std::string> run_flag_names() {
  std::vector<std::string> names{"-h", "--help"};
  for (const OptionSpec& spec : kOptions) {
    if (spec.kind != Kind::flag && spec.kind != Kind::optional) continue;
    for (std::string& name : split(std::string(spec.names), ","))
      names.push_back(std::move(name));
  }
  return names;
}

void RunArguments::set(std::string_view canonical, std::string value, std::string origin) {
  Setting& setting = settings_[std::string(canonical)];
  if (spec_of(canonical).kind != Kind::repeated) setting.values.clear();
  setting.values.push_back(std::move(value));
  setting.origin = std::move(origin);
}

void RunArguments::take_environment(const std::function<const char*(const char*)>& getenv) {
  for (const OptionSpec& spec : kOptions) {
    if (spec.variable.empty() || given(spec.canonical)) continue;
    const std::string variable(spec.variable);
    const char* value = getenv(variable.c_str());
    if (value == nullptr && spec.canonical == "--ssh") {
      value = getenv("COHORT_SSH");
      if (value != nullptr) set(spec.canonical, value, "COHORT_SSH");
      continue;
    }
    if (value == nullptr || *value == '\0') continue;
    if (spec.kind == Kind::repeated) {
      for (std::string& item : split(value, ","))
        set(spec.canonical, std::move(item), variable);
    } else {
      set(spec.canonical, value, variable);
    }
  }
}

const Setting* RunArguments::find(std::string_view canonical) const {
  auto found = settings_.find(canonical);
  return found == settings_.end() ? nullptr : &found->second;
}

bool RunArguments::flag(std::string_view canonical) const {
  const Given given = get(*this, canonical);
  return given && truth(given);
}

std::map<int, int> parse_stream_spec(const std::string& text, const std::string& origin) {
  const Given given{text, origin};
  const std::string expected =
      "expected 0-3 (1 stdout, 2 stderr, 3 both) for every local rank, or LOCAL_RANK:0-3 pairs "
      "such as 0:3,1:2";
  std::map<int, int> spec;
  if (text.find(':') == std::string::npos) {
    spec[-1] = integer(given, 0, 3, expected);
    return spec;
  }
  for (const std::string& item : split(text, ",")) {
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos) bad(given, expected);
    auto rank = detail::parse_int(item.substr(0, colon));
    auto streams = detail::parse_int(item.substr(colon + 1));
    if (!rank || !streams || *rank < 0 || *rank > 1 << 20 || *streams < 0 || *streams > 3) {
      bad(given, expected);
    }
    spec[static_cast<int>(*rank)] = static_cast<int>(*streams);
  }
  return spec;
}

RunOptions to_run_options(const RunArguments& arguments, std::vector<std::string> program,
                          const HostCounts& host,
                          const std::function<const char*(const char*)>& getenv) {
  RunOptions options;
  options.command = std::move(program);
  if (options.command.empty()) {
    throw InvalidArgument("PROGRAM is missing (cohort run [options] PROGRAM [ARGS...])");
  }
  const bool over_ssh = arguments.given("--hostfile") || arguments.given("--hosts");
  if (const Given nproc = get(arguments, "--nproc-per-node")) {
    options.nproc_per_node = parse_nproc(nproc, host);
  }
  if (const Given addr = get(arguments, "--master-addr")) {
    if (addr.value.empty()) bad(addr, "expected a host name or address");
    options.master_addr = addr.value;
  }
  if (const Given port = get(arguments, "--master-port")) {
    options.master_port = integer(port, 0, 65535, "expected a TCP port from 1 to 65535");
  }
  if (const Given gpus = get(arguments, "--gpus-per-proc")) {
    options.gpus_per_proc = integer(gpus, 0, 64, "expected a number of GPUs from 0 to 64");
  }
  if (const Given bind = get(arguments, "--cpu-bind")) {
    if (!detail::parse_cpu_bind(bind.value)) bad(bind, "expected none, numa, gpu or cores");
    options.cpu_bind = bind.value;
  }
  if (const Given restarts = get(arguments, "--max-restarts")) {
    options.max_restarts = integer(restarts, 0, 1000000, "expected a number, 0 or more");
  }
  if (const Given grace = get(arguments, "--grace")) options.grace = seconds(grace, 0, 86400);
  if (const Given timeout = get(arguments, "--timeout")) {
    options.timeout = seconds(timeout, 0, 365 * 86400);
  }
  if (const Given signals = get(arguments, "--signals"))
    options.signals = split(signals.value, ", ");
  if (const Given dir = get(arguments, "--log-dir")) options.log_dir = dir.value;
  if (const Given trace = get(arguments, "--trace")) {
    if (trace.value.empty()) bad(trace, "expected a file name");
    options.trace = trace.value;
  }
  if (const Given redirects = get(arguments, "--redirects")) {
    options.redirects = parse_stream_spec(redirects.value, redirects.origin);
  }
  if (const Given tee = get(arguments, "--tee"))
    options.tee = parse_stream_spec(tee.value, tee.origin);
  if (arguments.flag("--no-prefix")) {
    options.prefix = "";
  } else if (const Given prefix = get(arguments, "--prefix")) {
    options.prefix = prefix.value;
  }
  if (const Given filter = get(arguments, "--local-ranks-filter")) {
    options.console_local_ranks = parse_rank_list(filter);
  }
  if (const Given style = get(arguments, "--local-rank-arg")) {
    if (style.value == "underscore" || style.value == "1" || style.value == "true") {
      options.local_rank_arg = RunOptions::LocalRankArg::underscore;
    } else if (style.value == "dash") {
      options.local_rank_arg = RunOptions::LocalRankArg::dash;
    } else if (style.value != "0" && style.value != "false") {
      bad(style,
          "expected nothing (--local_rank=N), =underscore (the same) or =dash "
          "(--local-rank=N)");
    }
  }
  if (const Given role = get(arguments, "--role")) {
    if (role.value.empty()) bad(role, "expected a role name");
    options.role = role.value;
  }
  const Given run_id = get(arguments, "--run-id");
  const Given rdzv_id = get(arguments, "--rdzv-id");
  if (run_id && rdzv_id && run_id.value != rdzv_id.value) {
    throw InvalidArgument(cat(run_id.origin, " '", run_id.value, "' and ", rdzv_id.origin, " '",
                              rdzv_id.value, "' disagree: they set the same id; give one"));
  }
  options.run_id = run_id ? run_id.value : rdzv_id.value;
  if (const Given python = get(arguments, "--python")) options.python = python.value;
  options.module = arguments.flag("--module");
  options.no_python = arguments.flag("--no-python");
  options.run_path = arguments.flag("--run-path");
  if (options.no_python && (options.module || options.run_path)) {
    throw InvalidArgument(cat("--no-python runs PROGRAM without Python, so it cannot go with ",
                              options.module ? "--module" : "--run-path"));
  }
  (void)arguments.flag("--use-env");  // validates a PET_USE_ENV value; the behaviour is the default
  options.agent_store = !arguments.flag("--no-agent-store");
  if (const char* relay = getenv("COHORT_STORE_RELAY"); relay != nullptr && *relay != 0) {
    options.store_relay = truth(Given{relay, "COHORT_STORE_RELAY"});
  }
  if (const char* relay = getenv("COHORT_TORCH_STORE_RELAY"); relay != nullptr && *relay != 0) {
    options.torch_store_relay = truth(Given{relay, "COHORT_TORCH_STORE_RELAY"});
  }
  if (const char* width = getenv("COHORT_TREE_WIDTH"); width != nullptr && *width != 0) {
    options.tree_width =
        integer(Given{width, "COHORT_TREE_WIDTH"}, 2, 1 << 20,
                "expected a whole number of 2 or more: the relays of other nodes that connect to "
                "one (docs/rendezvous.md)");
  }
  if (const Given backend = get(arguments, "--rdzv-backend")) {
    if (backend.value.rfind("etcd", 0) == 0) {
      bad(backend,
          "cohort's own store is the rendezvous, no etcd server is needed: use c10d "
          "(or drop the option) with the same --rdzv-endpoint");
    }
    if (backend.value != "c10d" && backend.value != "static") {
      bad(backend, "expected c10d or static");
    }
  }
  if (const Given conf = get(arguments, "--rdzv-conf")) apply_rdzv_conf(conf, options);
  if (const Given timeout = get(arguments, "--rdzv-timeout")) {
    options.rendezvous_timeout = seconds(timeout, 0.001, 86400 * 7);
  }
  if (const Given timeout = get(arguments, "--heartbeat-timeout")) {
    options.heartbeat_timeout = seconds(timeout, 0.001, 86400);
  }
  if (const Given interval = get(arguments, "--monitor-interval")) (void)seconds(interval, 0, 3600);
  if (const Given method = get(arguments, "--start-method")) {
    if (method.value != "spawn" && method.value != "fork" && method.value != "forkserver") {
      bad(method, "expected spawn, fork or forkserver");
    }
  }
  if (const Given handler = get(arguments, "--event-log-handler")) {
    if (handler.value != "null" && handler.value != "console") {
      bad(handler,
          "cohort has no event log plugins (its events are the failure report): null "
          "or console");
    }
  }
  for (const char* filters : {"--duplicate-stdout-filters", "--duplicate-stderr-filters"}) {
    if (const Given given = get(arguments, filters)) {
      bad(given,
          "cohort does not copy filtered lines to a file of their own: --log-dir DIR "
          "writes every rank's output, to grep; drop this option");
    }
  }
  if (const Given numa = get(arguments, "--numa-binding")) {
    bad(numa,
        "cohort does not bind workers to NUMA nodes yet: drop this option, and bind in "
        "PROGRAM (numactl --cpunodebind N python ...) if you need it");
  }
  if (arguments.flag("--virtual-local-rank")) {
    throw InvalidArgument(cat(get(arguments, "--virtual-local-rank").origin,
                              ": cohort does not give every worker LOCAL_RANK=0 with one GPU "
                              "visible: drop this option, and use LOCAL_RANK as the GPU index "
                              "(torch.cuda.set_device(LOCAL_RANK))"));
  }
  if (const Given specs = get(arguments, "--logs-specs")) {
    if (specs.value != "default" && specs.value != "DefaultLogsSpecs") {
      bad(specs, "cohort has no log plugins: use --log-dir, --redirects and --tee");
    }
  }
  if (const Given local_addr = get(arguments, "--local-addr"))
    options.local_addr = local_addr.value;
  if (over_ssh && !arguments.given("--nproc-per-node")) options.nproc_per_node = 1;
  place(arguments, options, getenv);
  // Not checked against the world size: under srun or mpirun it is not known yet.
  if (const Given ranks = get(arguments, "--ranks")) options.console_ranks = parse_rank_list(ranks);
  return options;
}

}  // namespace cohort::cli

// cohort run [options] PROGRAM [ARGS...]: torchrun's options (dash and
// underscore spellings, PET_<NAME> environment fallbacks) plus cohort's.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/launch.hpp>

#include "cli/commands.hpp"
#include "cli/host_probe.hpp"
#include "core/fd.hpp"
#include "core/strings.hpp"
#include "launch/node_plan.hpp"
#include "launch/ssh_launch.hpp"

namespace cohort::cli {
namespace {

struct RunArguments {
  std::string nproc = "1";
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool standalone = false;  // accepted as torchrun does; one node always has its own free port
  int max_restarts = 0;
  double grace_seconds = 5;
  std::string signals = "TERM,INT,HUP,QUIT,USR1,USR2";
  std::string log_dir;
  std::string prefix;
  bool prefix_given = false;
  bool no_prefix = false;
  std::string ranks;
  bool local_rank_arg = false;
  std::string run_id;
  std::string python = "python3";
  std::string nnodes = "1";
  int node_rank = 0;
  bool node_rank_given = false;
  bool master_addr_given = false;
  double rdzv_timeout_seconds = 300;
  double heartbeat_timeout_seconds = 10;
  bool no_srun = false;
  bool nproc_given = false;
  std::string hostfile;
  std::string hosts;
  std::string ssh = "ssh";
  std::vector<std::string> forward_env;
  std::vector<std::string> forward_env_prefixes;
  std::string remote_cohort;
  std::string rdzv_host;  // internal: set by --hostfile for the agents it starts
  bool store_elsewhere = false;
  bool stop_on_stdin_eof = false;
};

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

int gpu_count() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    return static_cast<int>(split(visible, ",").size());
  }
  return static_cast<int>(probe_gpus().devices.size());
}

// -n N|auto|cpu|gpu, as torchrun: auto is the GPU count, else the CPU count.
int parse_nproc(const std::string& text) {
  if (text == "cpu") return probe_cpus().usable;
  if (text == "gpu" || text == "auto") {
    const int gpus = gpu_count();
    if (gpus > 0) return gpus;
    if (text == "gpu") {
      throw InvalidArgument(
          "--nproc-per-node gpu: no GPU here (no NVIDIA driver loaded, or "
          "CUDA_VISIBLE_DEVICES is empty); give a number instead");
    }
    return probe_cpus().usable;
  }
  auto number = detail::parse_int(text);
  if (!number || *number < 1 || *number > 4096) {
    throw InvalidArgument(detail::cat("--nproc-per-node '", text,
                                      "': expected a number from 1 to 4096, auto, cpu or gpu"));
  }
  return static_cast<int>(*number);
}

// "0,2-3" -> {0, 2, 3}.
std::set<int> parse_ranks(const std::string& text, int world_size) {
  std::set<int> ranks;
  for (const std::string& item : split(text, ",")) {
    const std::size_t dash = item.find('-', 1);
    auto low = detail::parse_int(item.substr(0, dash));
    auto high = dash == std::string::npos ? low : detail::parse_int(item.substr(dash + 1));
    if (!low || !high || *low < 0 || *high < *low || *high >= world_size) {
      throw InvalidArgument(detail::cat("--ranks '", text, "': '", item,
                                        "' is not a rank or range of ranks 0-", world_size - 1));
    }
    for (auto rank = *low; rank <= *high; ++rank)
      ranks.insert(static_cast<int>(rank));
  }
  return ranks;
}

// --nnodes N, or torchrun's MIN:MAX with MIN == MAX (no elastic membership).
int parse_nnodes(const std::string& text) {
  const std::size_t colon = text.find(':');
  auto low = detail::parse_int(text.substr(0, colon));
  auto high = colon == std::string::npos ? low : detail::parse_int(text.substr(colon + 1));
  if (!low || !high || *low < 1 || *low > 100000) {
    throw InvalidArgument(detail::cat("--nnodes '", text, "': expected a number of nodes"));
  }
  if (*high != *low) {
    throw InvalidArgument(detail::cat("--nnodes '", text,
                                      "': elastic membership (MIN:MAX) is not supported; give "
                                      "one number"));
  }
  return static_cast<int>(*low);
}

std::chrono::milliseconds to_duration(double seconds, const char* option) {
  if (!(seconds > 0) || seconds > 86400 * 7) {
    throw InvalidArgument(detail::cat(option, ": expected seconds, more than 0"));
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

// GPUs this node may use, when known: CUDA_VISIBLE_DEVICES, else what Slurm says.
int visible_gpus() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    return static_cast<int>(split(visible, ",").size());
  }
  if (const char* slurm = std::getenv("SLURM_GPUS_ON_NODE")) {
    if (auto count = detail::parse_int(slurm)) return static_cast<int>(*count);
  }
  return -1;
}

std::string read_file(const std::string& path, const char* option) {
  std::ifstream file(path);
  if (!file) {
    throw InvalidArgument(
        detail::cat(option, " ", path, ": cannot read it (", std::strerror(errno), ")"));
  }
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Several nodes: from a host list (ssh), by flags (torchrun's static form),
// else from Slurm.
void place_nodes(const RunArguments& arguments, RunOptions& options) {
  options.rendezvous_timeout = to_duration(arguments.rdzv_timeout_seconds, "--rdzv-timeout");
  options.heartbeat_timeout =
      to_duration(arguments.heartbeat_timeout_seconds, "--heartbeat-timeout");
  if (!arguments.hostfile.empty() || !arguments.hosts.empty()) {
    if (!arguments.hostfile.empty() && !arguments.hosts.empty()) {
      throw InvalidArgument("cohort run: give --hostfile or --hosts, not both");
    }
    options.hosts = arguments.hosts.empty()
                        ? detail::parse_hostfile(read_file(arguments.hostfile, "--hostfile"),
                                                 arguments.hostfile)
                        : detail::parse_host_list(arguments.hosts);
    // -n given: that many on every host; else each host's slots (1 when none).
    for (RunOptions::Host& host : options.hosts) {
      if (arguments.nproc_given) host.slots = 0;
    }
    options.ssh = arguments.ssh;
    options.forward_env = arguments.forward_env;
    options.forward_env_prefixes = arguments.forward_env_prefixes;
    options.remote_cohort = arguments.remote_cohort;
    return;
  }
  const int nnodes = parse_nnodes(arguments.nnodes);
  if (nnodes > 1 || arguments.node_rank_given) {
    options.nnodes = nnodes;
    options.node_rank = arguments.node_rank;
    // torchrun's static rendezvous: --master-addr/--master-port is where the
    // agents meet; the workers' MASTER_PORT is another port, free on node 0.
    options.rdzv_port = arguments.master_port != 0 ? arguments.master_port : 29500;
    options.master_port = 0;
    options.rdzv_host = arguments.rdzv_host;
    options.store_served_elsewhere = arguments.store_elsewhere;
    options.stop_on_stdin_eof = arguments.stop_on_stdin_eof;
    if (const char* token = std::getenv(detail::kTokenVariable)) options.job_token = token;
    return;
  }
  detail::place_under_launcher(options, detect_launch(), process_environment(), visible_gpus());
}

// This process's own command line, to run it again under srun.
std::vector<std::string> own_argv() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  std::string item;
  while (std::getline(file, item, '\0'))
    argv.push_back(item);
  if (!argv.empty()) {
    const std::string path = detail::executable_path();
    argv.front() = path.empty() ? "/proc/self/exe" : path;
  }
  return argv;
}

// Inside an allocation of several nodes but outside a step: run this same
// command once per node through srun, which then makes the agents.
[[noreturn]] void exec_srun(const std::vector<std::string>& argv) {
  std::string shown;
  for (const std::string& item : argv)
    shown += (shown.empty() ? "" : " ") + item;
  std::fprintf(stderr, "cohort run: inside Slurm job %s, one agent per node: %s\n",
               std::getenv("SLURM_JOB_ID"), shown.c_str());
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (const std::string& item : argv)
    pointers.push_back(const_cast<char*>(item.c_str()));
  pointers.push_back(nullptr);
  execvp(pointers[0], pointers.data());
  throw Error(detail::cat("cohort run: cannot start srun: ", std::strerror(errno),
                          " (is Slurm's srun on PATH? --no-srun runs on this node only)"));
}

RunOptions to_options(const RunArguments& arguments, std::vector<std::string> command) {
  RunOptions options;
  options.command = std::move(command);
  if (options.command.empty()) {
    throw InvalidArgument(
        "cohort run: PROGRAM is missing (cohort run [options] PROGRAM [ARGS...])");
  }
  options.nproc_per_node =
      arguments.nproc_given || (arguments.hostfile.empty() && arguments.hosts.empty())
          ? parse_nproc(arguments.nproc)
          : 1;
  options.master_addr = arguments.master_addr;
  options.master_port = arguments.master_port;
  options.max_restarts = arguments.max_restarts;
  if (!(arguments.grace_seconds >= 0) || arguments.grace_seconds > 86400) {
    throw InvalidArgument("--grace: expected seconds from 0 to 86400");
  }
  options.grace = std::chrono::milliseconds(std::llround(arguments.grace_seconds * 1000));
  options.signals = split(arguments.signals, ", ");
  options.log_dir = arguments.log_dir;
  if (arguments.no_prefix) {
    options.prefix = "";
  } else if (arguments.prefix_given) {
    options.prefix = arguments.prefix;
  }
  if (!arguments.ranks.empty()) {
    options.console_ranks = parse_ranks(arguments.ranks, options.nproc_per_node);
  }
  options.local_rank_arg = arguments.local_rank_arg;
  options.run_id = arguments.run_id;
  options.python = arguments.python;
  place_nodes(arguments, options);
  return options;
}

}  // namespace

void add_run_command(CLI::App& app, Runner& run,
                     std::optional<std::vector<std::string>> after_separator) {
  auto arguments = std::make_shared<RunArguments>();
  CLI::App* command = app.add_subcommand(
      "run",
      "Run PROGRAM as N cooperating workers on this machine (a drop-in for torchrun and "
      "python -m torch.distributed.launch). Every option is also read from PET_<OPTION>, "
      "like torchrun, and accepts underscores (--nproc_per_node).");
  command->prefix_command();  // PROGRAM and everything after it belong to PROGRAM
  const auto env = [](const char* name) { return std::string("PET_") + name; };
  command
      ->add_option("-n,--nproc-per-node,--nproc_per_node", arguments->nproc,
                   "workers: a number, auto (GPUs, else CPUs), cpu or gpu (default 1); "
                   "per node with --nnodes, --hostfile, --hosts or under srun")
      ->envname(env("NPROC_PER_NODE"))
      ->each([arguments](const std::string&) { arguments->nproc_given = true; });
  command
      ->add_option("--nnodes", arguments->nnodes,
                   "nodes in the job, one cohort run on each (default 1; under srun: the tasks "
                   "of the step)")
      ->envname(env("NNODES"));
  command
      ->add_option("--node-rank,--node_rank", arguments->node_rank,
                   "this node's rank, 0 to nnodes-1 (with --nnodes)")
      ->envname(env("NODE_RANK"))
      ->each([arguments](const std::string&) { arguments->node_rank_given = true; });
  command
      ->add_option("--master-addr,--master_addr", arguments->master_addr,
                   "MASTER_ADDR given to workers (default 127.0.0.1); with --nnodes, node 0's "
                   "address, where the agents meet")
      ->envname(env("MASTER_ADDR"))
      ->each([arguments](const std::string&) { arguments->master_addr_given = true; });
  command
      ->add_option("--master-port,--master_port", arguments->master_port,
                   "MASTER_PORT given to workers (default: a free port); with --nnodes, the "
                   "port node 0's agent serves the job's store on (default 29500), and workers "
                   "get another")
      ->envname(env("MASTER_PORT"));
  command
      ->add_option("--rdzv-timeout,--rdzv_timeout", arguments->rdzv_timeout_seconds,
                   "seconds the nodes wait for each other at start (default 300)")
      ->envname(env("RDZV_TIMEOUT"));
  command
      ->add_option("--heartbeat-timeout", arguments->heartbeat_timeout_seconds,
                   "seconds without a heartbeat after which a node counts as lost and the job "
                   "stops (default 10)")
      ->envname(env("HEARTBEAT_TIMEOUT"));
  command
      ->add_option("--hostfile", arguments->hostfile,
                   "start one agent per host over ssh: lines `host [slots=N]`; -n, when given, "
                   "applies to every host instead of its slots")
      ->envname(env("HOSTFILE"));
  command->add_option("--hosts", arguments->hosts, "the same as a list: h1:2,h2:2")
      ->envname(env("HOSTS"));
  command
      ->add_option("--ssh", arguments->ssh,
                   "how to reach the hosts (default ssh; e.g. \"ssh -p 2222\")")
      ->envname("COHORT_SSH");
  command
      ->add_option("--env", arguments->forward_env,
                   "pass this environment variable on to the hosts (repeatable)")
      ->envname(env("ENV"));
  command
      ->add_option("--env-prefix", arguments->forward_env_prefixes,
                   "pass every variable starting with this on to the hosts, e.g. NCCL_ "
                   "(repeatable)")
      ->envname(env("ENV_PREFIX"));
  command
      ->add_option("--remote-cohort", arguments->remote_cohort,
                   "cohort's path on the hosts (default: this one's)")
      ->envname(env("REMOTE_COHORT"));
  // Set by --hostfile on the agents it starts; not for people.
  command->add_option("--rdzv-host", arguments->rdzv_host)->group("");
  command->add_flag("--store-elsewhere", arguments->store_elsewhere)->group("");
  command->add_flag("--stop-on-stdin-eof", arguments->stop_on_stdin_eof)->group("");
  command
      ->add_flag("--no-srun", arguments->no_srun,
                 "inside a Slurm allocation of several nodes, run on this node only instead of "
                 "starting one agent per node with srun")
      ->envname(env("NO_SRUN"));
  command
      ->add_flag("--standalone", arguments->standalone,
                 "one node, the store on a free port (the default on one node)")
      ->envname(env("STANDALONE"));
  command
      ->add_option("--max-restarts,--max_restarts", arguments->max_restarts,
                   "restart all workers up to N times after a failure (default 0)")
      ->envname(env("MAX_RESTARTS"))
      ->check(CLI::Range(0, 1000000));
  command
      ->add_option("--grace", arguments->grace_seconds,
                   "seconds between SIGTERM and SIGKILL when stopping workers (default 5)")
      ->envname(env("GRACE"));
  command
      ->add_option("--signals", arguments->signals,
                   "signals passed on to workers (default TERM,INT,HUP,QUIT,USR1,USR2); "
                   "TERM INT HUP QUIT also stop the job")
      ->envname(env("SIGNALS"));
  command
      ->add_option("--log-dir,--log_dir", arguments->log_dir,
                   "also write each rank's output to DIR/attempt_K/rank_R/{stdout,stderr}.log")
      ->envname(env("LOG_DIR"));
  command
      ->add_option("--prefix", arguments->prefix,
                   "console line prefix with {rank} {local_rank} {host} (default '[{rank}] ' "
                   "with more than one worker)")
      ->envname(env("PREFIX"))
      ->each([arguments](const std::string&) { arguments->prefix_given = true; });
  command->add_flag("--no-prefix,--no_prefix", arguments->no_prefix, "no console line prefix")
      ->envname(env("NO_PREFIX"));
  command
      ->add_option("--ranks", arguments->ranks,
                   "ranks whose output reaches the console, e.g. 0 or 0,2-3 (log files get all)")
      ->envname(env("RANKS"));
  command
      ->add_flag("--local-rank-arg,--local_rank_arg", arguments->local_rank_arg,
                 "append --local_rank=N to the arguments (legacy torch.distributed.launch)")
      ->envname(env("LOCAL_RANK_ARG"));
  command
      ->add_option("--run-id,--run_id", arguments->run_id,
                   "COHORT_RUN_ID and TORCHELASTIC_RUN_ID for the workers (default: random)")
      ->envname(env("RUN_ID"));
  command
      ->add_option("--python", arguments->python,
                   "interpreter for a PROGRAM ending in .py (default python3)")
      ->envname(env("PYTHON"));
  command->footer(
      "Exit status: 0 when every worker succeeds; else the first failed worker's code, 128+N when "
      "it was killed by signal N, 130 after Ctrl-C. On a failure every worker is stopped and a "
      "report names the rank, host, pid, reason and its last stderr lines.");
  command->callback([&run, arguments, command, after_separator = std::move(after_separator)] {
    std::vector<std::string> program = command->remaining();
    if (after_separator) {
      if (!program.empty()) {
        throw CLI::ExtrasError(
            detail::cat("PROGRAM goes after --, but '", program.front(), "' comes before it"),
            CLI::ExitCodes::ExtrasError);
      }
      program = *after_separator;
    } else if (!program.empty() && program.front().size() > 1 && program.front()[0] == '-') {
      // prefix_command() would take an unknown option for PROGRAM.
      throw CLI::ExtrasError(
          detail::cat("unknown option '", program.front(),
                      "' (to run a PROGRAM starting with '-', put -- before it)"),
          CLI::ExitCodes::ExtrasError);
    }
    run = [arguments, program] {
      if (!arguments->no_srun && parse_nnodes(arguments->nnodes) == 1 &&
          !arguments->node_rank_given && arguments->hostfile.empty() && arguments->hosts.empty()) {
        if (auto srun = detail::srun_for_allocation(process_environment(), own_argv())) {
          exec_srun(*srun);
        }
      }
      return cohort::run(to_options(*arguments, program));
    };
  });
}

std::optional<std::vector<std::string>> take_program_after_separator(
    std::vector<std::string>& args) {
  // CLI11 treats what follows `--` as extra arguments, not as PROGRAM: take
  // it out before parsing. Only a `--` among cohort's options counts; one
  // after PROGRAM is PROGRAM's own. Every option of `cohort run` takes one
  // value except these flags (keep in step with add_run_command).
  static const std::set<std::string> kFlags = {"-h",
                                               "--help",
                                               "--standalone",
                                               "--no-prefix",
                                               "--no_prefix",
                                               "--local-rank-arg",
                                               "--local_rank_arg",
                                               "--no-srun",
                                               "--store-elsewhere",
                                               "--stop-on-stdin-eof"};
  if (args.size() < 2 || args[1] != "run") return std::nullopt;
  for (std::size_t i = 2; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      std::vector<std::string> program(args.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                       args.end());
      args.resize(i);
      return program;
    }
    if (arg.size() < 2 || arg[0] != '-') return std::nullopt;  // PROGRAM
    const bool value_attached =
        arg.find('=') != std::string::npos || (arg[1] != '-' && arg.size() > 2);  // -n4
    if (!kFlags.count(arg) && !value_attached) ++i;  // skip the option's value
  }
  return std::nullopt;
}

}  // namespace cohort::cli

// cohort run [options] PROGRAM [ARGS...]: torchrun's options (dash and
// underscore spellings, PET_<NAME> environment fallbacks) plus cohort's.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include <cohort/errors.hpp>
#include <cohort/launch.hpp>

#include "cli/commands.hpp"
#include "cli/host_probe.hpp"
#include "core/strings.hpp"

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

RunOptions to_options(const RunArguments& arguments, std::vector<std::string> command) {
  RunOptions options;
  options.command = std::move(command);
  if (options.command.empty()) {
    throw InvalidArgument(
        "cohort run: PROGRAM is missing (cohort run [options] PROGRAM [ARGS...])");
  }
  options.nproc_per_node = parse_nproc(arguments.nproc);
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
                   "workers: a number, auto (GPUs, else CPUs), cpu or gpu (default 1)")
      ->envname(env("NPROC_PER_NODE"));
  command
      ->add_option("--master-addr,--master_addr", arguments->master_addr,
                   "MASTER_ADDR given to workers (default 127.0.0.1)")
      ->envname(env("MASTER_ADDR"));
  command
      ->add_option("--master-port,--master_port", arguments->master_port,
                   "MASTER_PORT given to workers (default: a free port)")
      ->envname(env("MASTER_PORT"));
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
    run = [arguments, program] { return cohort::run(to_options(*arguments, program)); };
  });
}

std::optional<std::vector<std::string>> take_program_after_separator(
    std::vector<std::string>& args) {
  // CLI11 treats what follows `--` as extra arguments, not as PROGRAM: take
  // it out before parsing. Only a `--` among cohort's options counts; one
  // after PROGRAM is PROGRAM's own. Every option of `cohort run` takes one
  // value except these flags (keep in step with add_run_command).
  static const std::set<std::string> kFlags = {
      "-h",          "--help",           "--standalone",    "--no-prefix",
      "--no_prefix", "--local-rank-arg", "--local_rank_arg"};
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

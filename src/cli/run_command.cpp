// cohort run [options] PROGRAM [ARGS...]: the options of run_arguments.hpp on
// CLI11, then the job. Usage errors (a bad option or value, a missing
// PROGRAM, a geometry that makes no sense) exit 2; a PROGRAM that cannot be
// run exits 127 or 126, before any worker starts.
#include <algorithm>
#include <cerrno>
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
#include "cli/run_arguments.hpp"
#include "cli/run_words.hpp"
#include "core/fd.hpp"
#include "core/gpus/gpus.hpp"
#include "core/strings.hpp"
#include "launch/node_plan.hpp"

namespace cohort::cli {
namespace {

using detail::cat;

// -n gpu: the GPUs this process may use (sysfs, CUDA_VISIBLE_DEVICES,
// Slurm's); where sysfs shows none (a container without it), what the
// environment says.
int gpu_count() {
  const Environment env = process_environment();
  const detail::NodeGpus node = detail::read_node_gpus(env, false);
  if (!node.inventory.gpus.empty()) return static_cast<int>(node.visible.gpus.size());
  return std::max(0, detail::gpus_in_environment(env));
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
  throw Error(cat("cohort run: cannot start srun: ", std::strerror(errno),
                  " (is Slurm's srun on PATH? --no-srun runs on this node only)"));
}

const char* environment_value(const char* name) {
  return std::getenv(name);
}

void add_option(CLI::App& command, const OptionSpec& spec,
                const std::shared_ptr<RunArguments>& arguments) {
  const std::string names(spec.names);
  const std::string canonical(spec.canonical);
  const std::string help(spec.help);
  CLI::Option* option = nullptr;
  switch (spec.kind) {
    case OptionSpec::Kind::value:
    case OptionSpec::Kind::repeated:
      option = command.add_option(
          names,
          [arguments, canonical](const CLI::results_t& values) {
            for (const std::string& value : values)
              arguments->set(canonical, value, canonical);
            return true;
          },
          help);
      // torchrun's (argparse's) way: a value given again replaces the last;
      // a repeated option keeps each, one value a time.
      if (spec.kind == OptionSpec::Kind::repeated) {
        option->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      } else {
        option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      }
      break;
    case OptionSpec::Kind::flag:
      option = command.add_flag_callback(
          names, [arguments, canonical] { arguments->set(canonical, "1", canonical); }, help);
      break;
    case OptionSpec::Kind::optional: {
      // A flag whose value may follow '=' only (--local-rank-arg=dash): a
      // separate word after it is PROGRAM's.
      auto value = std::make_shared<std::string>();
      std::string with_defaults;  // "--a{v},--b{v}": what each name means bare
      for (std::size_t start = 0; start < names.size();) {
        const std::size_t comma = std::min(names.find(',', start), names.size());
        with_defaults += cat(with_defaults.empty() ? "" : ",", names.substr(start, comma - start),
                             "{", spec.bare_value, "}");
        start = comma + 1;
      }
      option = command.add_flag(with_defaults, *value, help);
      option->each([arguments, canonical, value](const std::string& given) {
        arguments->set(canonical, given, canonical);
      });
      break;
    }
  }
  if (!spec.variable.empty() && !help.empty()) {
    option->description(cat(help, " [", spec.variable, "]"));
  }
  if (help.empty()) option->group("");
}

}  // namespace

void add_run_command(CLI::App& app, Runner& run,
                     std::optional<std::vector<std::string>> after_separator, RunStart start) {
  auto arguments = std::make_shared<RunArguments>();
  CLI::App* command = app.add_subcommand(
      "run",
      "Run PROGRAM as N cooperating workers (a drop-in for torchrun and python -m "
      "torch.distributed.launch: their options in both spellings, --nproc-per-node and "
      "--nproc_per_node, each also read from PET_<OPTION>).");
  command->prefix_command();  // PROGRAM and everything after it belong to PROGRAM
  for (const OptionSpec& spec : run_option_table())
    add_option(*command, spec, arguments);
  command->footer(
      "Exit status: 0 when every worker succeeds; else the first failed worker's code, 128+N when "
      "it was killed by signal N, 130 after Ctrl-C; 2 for a usage error, 127 when PROGRAM is not "
      "found, 126 when it is not executable. On a failure every worker is stopped and a report "
      "names the rank, host, pid, reason and its last stderr lines.");
  command->callback([&run, arguments, command, start = std::move(start),
                     after_separator = std::move(after_separator)] {
    std::vector<std::string> program = command->remaining();
    if (after_separator) {
      if (!program.empty()) {
        throw CLI::ExtrasError(
            cat("PROGRAM goes after --, but '", program.front(), "' comes before it"),
            CLI::ExitCodes::ExtrasError);
      }
      program = *after_separator;
    } else if (!program.empty() && program.front().size() > 1 && program.front()[0] == '-') {
      // prefix_command() would take an unknown option for PROGRAM.
      throw CLI::ExtrasError(cat("unknown option '", program.front(),
                                 "' (to run a PROGRAM starting with '-', put -- before it)"),
                             CLI::ExitCodes::ExtrasError);
    }
    run = [start, request = RunRequest{*arguments, std::move(program)}] { return start(request); };
  });
}

int start_run(RunRequest request) {
  request.arguments.take_environment(environment_value);
  RunOptions options;
  try {
    const HostCounts host{[] { return probe_cpus().usable; }, gpu_count};
    options = to_run_options(request.arguments, request.program, host, environment_value);
    if (!request.arguments.flag("--no-srun") && options.nnodes == 1 && options.node_rank < 0 &&
        options.hosts.empty()) {
      if (auto srun = detail::srun_for_allocation(process_environment(), own_argv())) {
        exec_srun(*srun);
      }
    }
  } catch (const InvalidArgument& error) {
    throw UsageError(error.what());
  }
  try {
    return cohort::run(options);
  } catch (const InvalidArgument& error) {
    // Refused before any worker started: the options or the geometry.
    throw UsageError(error.what());
  }
}

Runner read_run_quickly(const std::vector<std::string>& args) {
  if (args.size() < 3 || args[1] != "run") return {};
  std::optional<RunRequest> request = read_run_words(std::span(args).subspan(2));
  if (!request) return {};
  return [request = std::move(*request)] { return start_run(request); };
}

std::optional<std::vector<std::string>> take_program_after_separator(
    std::vector<std::string>& args) {
  // CLI11 treats what follows `--` as extra arguments, not as PROGRAM: take
  // it out before parsing. Only a `--` among cohort's options counts; one
  // after PROGRAM is PROGRAM's own.
  static const std::vector<std::string> kFlags = run_flag_names();
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
    const bool flag = std::find(kFlags.begin(), kFlags.end(), arg) != kFlags.end();
    if (!flag && !value_attached) ++i;  // skip the option's value
  }
  return std::nullopt;
}

}  // namespace cohort::cli

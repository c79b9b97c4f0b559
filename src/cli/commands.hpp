// The `cohort` subcommands. Each add_* function registers one subcommand on
// the CLI11 app; when that subcommand is parsed, its callback stores the body
// to run in `run`, which returns the process exit status.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <cohort/errors.hpp>

#include "cli/run_words.hpp"

namespace CLI {
class App;
}

namespace cohort::cli {

using Runner = std::function<int()>;

/// Exit statuses of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< any error but a usage error
inline constexpr int kExitUsage = 2;    ///< unknown option, missing argument, ...

/// A usage error found after parsing (a bad option value, a geometry that
/// makes no sense): main() prints it in one line and exits kExitUsage.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// The subcommands, for "unknown command" messages.
inline constexpr const char* kCommands[] = {"run", "env", "hostlist", "bench", "agent"};

/// What `cohort env` and `cohort bench` do, for `cohort --help`.
inline constexpr const char* kEnvSummary =
    "Show what a worker started here would see: rank, sizes, master, launcher (each with the "
    "variable it came from), network interfaces, CPUs, GPUs, settings";
inline constexpr const char* kBenchSummary = "Benchmarks of this machine and build";

/// Registers an executable's subcommands; may take `cohort run`'s PROGRAM
/// out of the arguments (take_program_after_separator).
using CommandSet = std::function<void(CLI::App&, Runner&, std::vector<std::string>& args)>;

/// `quick`, when given, may take the command line first: it returns the
/// body to run, or an empty Runner to leave the command line to CLI11.
using QuickCommand = std::function<Runner(const std::vector<std::string>& args)>;

/// The whole command line of an executable: parses argv with the
/// subcommands `add_commands` registers, runs the one chosen, and turns
/// errors into one line and the exit status.
int cli_main(int argc, char** argv, const CommandSet& add_commands, const QuickCommand& quick = {});

/// `cohort env` and `cohort bench` need the collectives (libcohort_comm, and
/// gloo and MPI behind it), which `cohort run` must not pay for at every
/// start: they live in a second executable, cohort-comm, installed in
/// COHORT_BIN_TO_COMM_TOOLS beside the `cohort` that runs. Replaces this
/// process with it, argv unchanged; returns only when that fails, with the
/// exit status, having said why.
int exec_comm_tools(char** argv);
/// `cohort --help` lists them all the same.
void add_comm_tools_summaries(CLI::App& app, const std::string& name);

void add_env_command(CLI::App& app, Runner& run);
void add_hostlist_command(CLI::App& app, Runner& run);
void add_bench_command(CLI::App& app, Runner& run);
/// Hidden: started by `cohort run --hostfile` over ssh on every host.
void add_agent_command(CLI::App& app, Runner& run);
/// Runs the job a `cohort run` command line asks for (PET_ variables fill in
/// what it left out) and returns its exit status; throws UsageError for a
/// bad option value or geometry.
int start_run(RunRequest request);
using RunStart = std::function<int(RunRequest)>;
/// `after_separator`: what followed `cohort run ... --` (see
/// take_program_after_separator), or nullopt when there was no `--`. The
/// runner it leaves in `run` calls `start` with what was parsed.
void add_run_command(CLI::App& app, Runner& run,
                     std::optional<std::vector<std::string>> after_separator,
                     RunStart start = start_run);
/// `cohort run` without CLI11 where the command line is a plain one
/// (run_words.hpp): cli_main's QuickCommand for `cohort`.
Runner read_run_quickly(const std::vector<std::string>& args);

/// Removes `--` and what follows it from `cohort run`'s arguments and returns
/// that (PROGRAM ARGS); nullopt for other commands or when there is no `--`.
std::optional<std::vector<std::string>> take_program_after_separator(
    std::vector<std::string>& args);

}  // namespace cohort::cli

// The `cohort` subcommands. Each add_* function registers one subcommand on
// the CLI11 app; when that subcommand is parsed, its callback stores the body
// to run in `run`, which returns the process exit status.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <cohort/errors.hpp>

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

void add_env_command(CLI::App& app, Runner& run);
void add_hostlist_command(CLI::App& app, Runner& run);
void add_bench_command(CLI::App& app, Runner& run);
/// Hidden: started by `cohort run --hostfile` over ssh on every host.
void add_agent_command(CLI::App& app, Runner& run);
/// `after_separator`: what followed `cohort run ... --` (see
/// take_program_after_separator), or nullopt when there was no `--`.
void add_run_command(CLI::App& app, Runner& run,
                     std::optional<std::vector<std::string>> after_separator);

/// Removes `--` and what follows it from `cohort run`'s arguments and returns
/// that (PROGRAM ARGS); nullopt for other commands or when there is no `--`.
std::optional<std::vector<std::string>> take_program_after_separator(
    std::vector<std::string>& args);

}  // namespace cohort::cli

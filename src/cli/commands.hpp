// The `cohort` subcommands. Each add_* function registers one subcommand on
// the CLI11 app; when that subcommand is parsed, its callback stores the body
// to run in `run`, which returns the process exit status.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace cohort::cli {

using Runner = std::function<int()>;

/// Exit statuses of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< any error but a usage error
inline constexpr int kExitUsage = 2;    ///< unknown option, missing argument, ...

void add_env_command(CLI::App& app, Runner& run);
void add_hostlist_command(CLI::App& app, Runner& run);

}  // namespace cohort::cli

// cohort agent: one host's agent of a `cohort run --hostfile` job, started
// there over ssh. It reads its plan (run_plan.hpp) from standard input and
// runs it; the end of standard input, when the launcher or its ssh goes
// away, stops the job. Hidden from --help: people never type it.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/launch.hpp>

#include "cli/commands.hpp"
#include "launch/agent_role.hpp"
#include "launch/run_plan.hpp"

namespace cohort::cli {

void add_agent_command(CLI::App& app, Runner& run) {
  CLI::App* command =
      app.add_subcommand("agent", "A host's agent of cohort run --hostfile (started over ssh).");
  command->group("");
  command->callback([&run] {
    run = []() -> int {
      if (isatty(STDIN_FILENO) == 1) {
        throw UsageError(
            "cohort agent is started by cohort run --hostfile or --hosts over ssh and reads "
            "its plan from standard input; to run a job, use cohort run");
      }
      try {
        detail::RunPlan plan = detail::read_run_plan(STDIN_FILENO, "the plan on standard input");
        return detail::run_agent_job(plan.options, std::move(plan.role));
      } catch (const InvalidArgument& error) {
        throw UsageError(error.what());
      }
    };
  });
}

}  // namespace cohort::cli

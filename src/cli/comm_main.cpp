// cohort-comm: `cohort env` and `cohort bench`, which `cohort` hands over
// to (commands.hpp, exec_comm_tools) so that its own start does not load
// the collectives' libraries. Run directly, it answers as `cohort` would.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace cohort::cli;
  return cli_main(argc, argv, [](CLI::App& app, Runner& run, std::vector<std::string>&) {
    add_env_command(app, run);
    add_bench_command(app, run);
  });
}

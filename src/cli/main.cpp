// cohort: the command-line tool. Exit status 0 on success, 2 on a usage
// error, 1 on any other error, with a one-line message on stderr. This
// executable runs jobs; `cohort env` and `cohort bench` are cohort-comm's
// (commands.hpp, exec_comm_tools).
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace cohort::cli;
  if (argc > 1 && (std::string_view(argv[1]) == "env" || std::string_view(argv[1]) == "bench")) {
    return exec_comm_tools(argv);
  }
  return cli_main(
      argc, argv,
      [](CLI::App& app, Runner& run, std::vector<std::string>& args) {
        add_run_command(app, run, take_program_after_separator(args));
        add_comm_tools_summaries(app, "env");
        add_hostlist_command(app, run);
        add_comm_tools_summaries(app, "bench");
        add_agent_command(app, run);
      },
      read_run_quickly);
}

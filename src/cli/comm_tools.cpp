// Handing `cohort env` and `cohort bench` to cohort-comm (commands.hpp).
#include <cerrno>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <unistd.h>

#include "cli/commands.hpp"
#include "core/fd.hpp"

namespace cohort::cli {

int exec_comm_tools(char** argv) {
  std::string self(4096, '\0');
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size());
  const std::string dir =
      length > 0 ? self.substr(0, self.rfind('/', static_cast<std::size_t>(length))) : ".";
  const std::string tools = dir + "/" COHORT_BIN_TO_COMM_TOOLS "/cohort-comm";
  execv(tools.c_str(), argv);
  const int error = errno;
  std::cerr << "cohort " << argv[1] << ": cannot run " << tools << " (" << detail::errno_text(error)
            << "), which does `cohort env` and `cohort bench`: the installation is incomplete; "
               "install cohort again (or build the cohort_comm_tools target)\n";
  return kExitFailure;
}

void add_comm_tools_summaries(CLI::App& app, const std::string& name) {
  app.add_subcommand(name, name == "env" ? kEnvSummary : kBenchSummary)->allow_extras();
}

}  // namespace cohort::cli

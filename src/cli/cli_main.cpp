// The command-line driver both executables share (commands.hpp, cli_main).
#include <algorithm>
#include <iostream>

#include <CLI/CLI.hpp>

#include <cohort/config.hpp>
#include <cohort/errors.hpp>

#include "cli/commands.hpp"

namespace {

// One line, whatever the message holds.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

std::string command_path(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* parent = app->get_parent(); parent != nullptr;
       parent = parent->get_parent()) {
    path.insert(0, parent->get_name() + " ");
  }
  return path;
}

// The deepest subcommand that was parsed, for "see 'cohort hostlist --help'".
const CLI::App* deepest_parsed(const CLI::App* app) {
  for (const CLI::App* sub : app->get_subcommands()) {
    if (sub->parsed()) return deepest_parsed(sub);
  }
  return app;
}

// Runs the parsed command `path` ("cohort run") and turns its errors into one
// line and the exit status.
int run_reporting(const cohort::cli::Runner& run, const std::string& path) {
  using namespace cohort::cli;
  // The library's messages may already say who they come from ("cohort run: ...").
  const auto prefixed = [&path](const std::string& message) {
    return message.rfind(path + ": ", 0) == 0 ? message : path + ": " + message;
  };
  try {
    return run ? run() : kExitUsage;
  } catch (const UsageError& error) {
    std::cerr << prefixed(one_line(error.what())) << " (see '" << path << " --help')\n";
    return kExitUsage;
  } catch (const cohort::ProgramError& error) {
    std::cerr << prefixed(one_line(error.what())) << "\n";
    return error.exit_code();
  } catch (const cohort::Error& error) {
    std::cerr << prefixed(one_line(error.what())) << "\n";
  } catch (const std::exception& error) {
    std::cerr << path << ": internal error: " << one_line(error.what()) << "\n";
  }
  return kExitFailure;
}

}  // namespace

namespace cohort::cli {

int cli_main(int argc, char** argv, const CommandSet& add_commands, const QuickCommand& quick) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() > 1 && !args[1].empty() && args[1][0] != '-' &&
      std::find(std::begin(kCommands), std::end(kCommands), args[1]) == std::end(kCommands)) {
    std::cerr << "cohort: unknown command '" << args[1]
              << "' (the commands are run, env, hostlist and bench; see 'cohort --help')\n";
    return kExitUsage;
  }
  if (quick) {
    if (Runner run = quick(args)) return run_reporting(run, "cohort " + args[1]);
  }

  CLI::App app(
      "cohort runs one program as many cooperating processes: on one machine, across "
      "machines, under Slurm and under mpirun.",
      "cohort");
  app.set_version_flag("--version", "cohort " COHORT_VERSION);
  app.require_subcommand(1);
  app.footer("Exit status: 0 success, 1 error, 2 usage error. 'cohort COMMAND --help' for more.");
  Runner run;
  add_commands(app, run, args);

  try {
    // CLI11 parses a reversed vector without the program name.
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << deepest_parsed(&app)->help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    std::cout << "cohort " COHORT_VERSION "\n";
    return kExitOk;
  } catch (const CLI::ParseError& error) {
    const std::string path = command_path(deepest_parsed(&app));
    std::cerr << path << ": " << one_line(error.what()) << " (see '" << path << " --help')\n";
    return kExitUsage;
  }
  return run_reporting(run, command_path(deepest_parsed(&app)));
}

}  // namespace cohort::cli

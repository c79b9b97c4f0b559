// What CLI11 makes of a `cohort run` command line: the reference that
// read_run_words (src/cli/run_words.hpp) must agree with, for the unit test
// and the fuzz target.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/run_words.hpp"

namespace cohort::cli {

/// `words`: what follows `cohort run`. nullopt where CLI11 refuses them.
inline std::optional<RunRequest> cli11_run_request(const std::vector<std::string>& words) {
  std::vector<std::string> args{"cohort", "run"};
  args.insert(args.end(), words.begin(), words.end());
  CLI::App app("", "cohort");
  app.require_subcommand(1);
  Runner run;
  std::optional<RunRequest> parsed;
  add_run_command(app, run, take_program_after_separator(args), [&parsed](RunRequest request) {
    parsed = std::move(request);
    return 0;
  });
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
    app.parse(reversed);
  } catch (const CLI::ParseError&) {
    return std::nullopt;
  }
  if (run) run();
  return parsed;
}

}  // namespace cohort::cli

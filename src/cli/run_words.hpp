// `cohort run`'s command line read straight from the option table
// (run_arguments.hpp), without CLI11. Declaring the table's options to CLI11
// took 0.35 ms of a 7 ms one-worker start (each new option is compared with
// every one before it); CLI11 still reads every command line this does not
// take, prints --help, and words what is wrong with a bad one.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/run_arguments.hpp"

namespace cohort::cli {

/// The options given on the command line, then PROGRAM and its arguments.
struct RunRequest {
  RunArguments arguments;
  std::vector<std::string> program;
  friend bool operator==(const RunRequest&, const RunRequest&) = default;
};

/// `words`: the command line after `cohort run`. Reads the common forms:
/// `--name VALUE`, `--name=VALUE`, `-n VALUE`, `-nVALUE`, a flag, an
/// optional flag bare or with `=VALUE`, in any order and repeated (a value:
/// the last counts; a repeated option: each), then PROGRAM ARGS... or
/// `-- PROGRAM ARGS...`. Returns nullopt, for CLI11 to read, when a word is
/// anything else: help, a name not in the table, a combined short flag, a
/// flag with `=`, a value that is missing or empty or starts with '-', or no
/// PROGRAM. What it returns is what CLI11 makes of the same words
/// (tests/unit/cli/run_words_test.cpp, tests/fuzz/run_words_fuzz.cpp).
std::optional<RunRequest> read_run_words(std::span<const std::string> words);

}  // namespace cohort::cli

// Runs a command to completion for a test: captured stdout and stderr, an
// exact environment, and a deadline after which the command's whole process
// group is ended (the test's own child, never anything found by name):
// SIGTERM, and SIGKILL to what is left 3 s later.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <cohort/launch_env.hpp>

namespace cohort::test {

struct ProcessResult {
  int exit_code = -1;  ///< the exit status, or -1 when killed by a signal
  int signal = 0;      ///< the terminating signal, or 0
  bool timed_out = false;
  std::string out;
  std::string err;
};

struct ProcessOptions {
  /// The child's whole environment; std::nullopt inherits the test's.
  std::optional<Environment> env;
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  std::string stdin_text;
  std::string working_directory;  ///< "" = the test's
};

/// A command started in the background, leading its own process group.
/// Its output is collected by finish(), so it should not write more than a
/// pipe holds (64 KiB per stream) before that.
class Subprocess {
 public:
  Subprocess(const std::vector<std::string>& argv, const ProcessOptions& options = {});
  ~Subprocess();  // ends the process group if finish() was not called
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const noexcept { return pid_; }
  /// Collects output until the command exits or the timeout (counted from
  /// start) passes; then its whole process group is ended (SIGTERM, then
  /// SIGKILL).
  ProcessResult finish();

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  std::chrono::steady_clock::time_point deadline_;
  bool finished_ = false;
};

/// Runs argv[0] (searched in PATH) with `argv` to completion. Throws
/// std::runtime_error only when the command cannot be started at all.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// "exit 1, stdout: ..., stderr: ..." for assertion messages.
std::string describe(const ProcessResult& result);

/// The directory searched for `name` in PATH, or "" when it is not found.
std::string find_in_path(const std::string& name);

}  // namespace cohort::test

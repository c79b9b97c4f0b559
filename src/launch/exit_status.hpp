// Worker exit statuses in the shell's terms, and signal names.
#pragma once

#include <string>

namespace cohort::detail {

/// The shell's exit code for a waitpid status: the code, or 128 + signal
/// (computed from WTERMSIG, so a core dump does not change it).
int shell_exit_code(int wait_status) noexcept;

/// The exit status of a job stopped by `signal`: 130 after SIGINT (Ctrl-C),
/// else 128 + signal.
int stop_exit_code(int signal) noexcept;

/// "SIGKILL", "SIGSEGV", ... or "signal 42".
std::string signal_name(int signal);

/// Parses "TERM", "SIGTERM" or "15" (any case); 0 when it is none of these.
int parse_signal(const std::string& text);

/// For people: "exited with code 3", "killed by SIGSEGV (signal 11)", with a
/// hint where one helps (SIGKILL and the OOM killer, code 127 and PATH).
std::string describe_exit(int wait_status);

/// The same without hints: "killed by SIGKILL (signal 9)", for one-line summaries.
std::string describe_exit_briefly(int wait_status);

}  // namespace cohort::detail

#include "launch/exit_status.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <signal.h>
#include <sys/wait.h>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

struct NamedSignal {
  int number;
  const char* name;
};

constexpr NamedSignal kSignals[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGXCPU, "SIGXCPU"},
    {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
};

}  // namespace

int shell_exit_code(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string signal_name(int signal) {
  for (const NamedSignal& entry : kSignals) {
    if (entry.number == signal) return entry.name;
  }
  return cat("signal ", signal);
}

int parse_signal(const std::string& text) {
  std::string upper = text;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (auto number = parse_int(upper); number && *number > 0 && *number < NSIG) {
    return static_cast<int>(*number);
  }
  if (upper.rfind("SIG", 0) != 0) upper = "SIG" + upper;
  for (const NamedSignal& entry : kSignals) {
    if (upper == entry.name) return entry.number;
  }
  return 0;
}

int stop_exit_code(int signal) noexcept {
  return signal == SIGINT ? 130 : 128 + signal;
}

std::string describe_exit_briefly(int wait_status) {
  if (WIFEXITED(wait_status)) return cat("exited with code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return cat("killed by ", signal_name(WTERMSIG(wait_status)), " (signal ", WTERMSIG(wait_status),
               ")");
  }
  return cat("ended with wait status ", wait_status);
}

std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status)) {
    const int code = WEXITSTATUS(wait_status);
    if (code == 127) return "exited with code 127 (command not found: check PROGRAM and PATH)";
    if (code == 126) return "exited with code 126 (not executable: check PROGRAM's permissions)";
    return cat("exited with code ", code);
  }
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    std::string text = cat("killed by ", signal_name(signal), " (signal ", signal, ")");
    if (WCOREDUMP(wait_status)) text += ", core dumped";
    if (signal == SIGKILL) {
      text +=
          "; SIGKILL that cohort did not send often comes from the kernel's OOM killer: "
          "check `dmesg` or the job's memory limit";
    }
    return text;
  }
  return cat("ended with wait status ", wait_status);
}

}  // namespace cohort::detail

// Blocks a set of signals (to read them from a signalfd) and ignores SIGPIPE
// for the lifetime of a scope, then restores both: cohort::run is a library
// call and must leave the process as it found it. And reading that signalfd.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

namespace cohort::detail {

class SignalGuard {
 public:
  explicit SignalGuard(const sigset_t& block) {
    pthread_sigmask(SIG_BLOCK, &block, &saved_mask_);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &saved_pipe_);
  }
  ~SignalGuard() {
    sigaction(SIGPIPE, &saved_pipe_, nullptr);
    pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  sigset_t saved_mask_{};
  struct sigaction saved_pipe_ {};
};

/// Calls `on_signal(number)` for every signal waiting in the (non-blocking)
/// signalfd `fd`; stops early when it returns false.
template <class OnSignal>
void drain_signalfd(int fd, OnSignal on_signal) {
  signalfd_siginfo info{};
  while (::read(fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    if (!on_signal(static_cast<int>(info.ssi_signo))) return;
  }
}

}  // namespace cohort::detail

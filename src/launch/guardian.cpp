#include "launch/guardian.hpp"

#include <cerrno>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

// The guardian's whole life: read +pgid / -pgid messages until EOF, then kill
// the groups still listed. No allocation after fork: a fixed table.
[[noreturn]] void guard(int input) {
  constexpr int kMaxGroups = 65536;
  static pid_t groups[kMaxGroups];
  int count = 0;
  for (;;) {
    int message = 0;
    const ssize_t n = ::read(input, &message, sizeof(message));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(message))) break;  // EOF: the agent is gone
    if (message > 0 && count < kMaxGroups) {
      groups[count++] = message;
    } else if (message < 0) {
      for (int i = 0; i < count; ++i) {
        if (groups[i] == -message) {
          groups[i] = groups[--count];
          break;
        }
      }
    }
  }
  for (int i = 0; i < count; ++i)
    ::kill(-groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

Guardian::Guardian() {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) {
    throw Error(cat("cohort run: pipe2 for the guardian failed: ", errno_text(errno)));
  }
  Fd read_end(ends[0]);
  pipe_ = Fd(ends[1]);
  pid_ = fork();
  if (pid_ < 0) throw Error(cat("cohort run: fork of the guardian failed: ", errno_text(errno)));
  if (pid_ == 0) {
    pipe_.reset();  // only the agent may hold the write end
    // Its own process group: a signal sent to the agent's group (Ctrl-C in a
    // terminal) must not take it away before the workers' groups are gone.
    setpgid(0, 0);
    guard(read_end.get());
  }
}

Guardian::~Guardian() {
  pipe_.reset();
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void Guardian::send(int message) noexcept {
  // A 4-byte write to a pipe is atomic; the guardian reads as fast as workers start.
  while (::write(pipe_.get(), &message, sizeof(message)) < 0 && errno == EINTR) {
  }
}

void Guardian::watch(pid_t pgid) noexcept {
  send(static_cast<int>(pgid));
}
void Guardian::forget(pid_t pgid) noexcept {
  send(-static_cast<int>(pgid));
}

}  // namespace cohort::detail

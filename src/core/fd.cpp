#include "core/fd.hpp"

#include <cstring>

#include <fcntl.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {

void Fd::reset(int fd) noexcept {
  // close() is not retried on EINTR: on Linux the descriptor is gone anyway.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void set_nonblocking(int fd, const char* what) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw Error(cat("fcntl(O_NONBLOCK) on ", what, " failed: ", errno_text(errno)));
  }
}

int write_all(int fd, std::string_view bytes) noexcept {
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    at += static_cast<std::size_t>(n);
  }
  return 0;
}

std::size_t write_without_waiting(int fd, std::string_view bytes) noexcept {
  SigpipeHeld held;
  std::size_t done = 0;
  while (done < bytes.size()) {
    iovec piece{const_cast<char*>(bytes.data() + done), bytes.size() - done};
    const ssize_t wrote = pwritev2(fd, &piece, 1, -1, RWF_NOWAIT);
    if (wrote > 0) {
      done += static_cast<std::size_t>(wrote);
    } else if (wrote < 0 && errno == EINTR) {
      continue;
    } else {
      if (wrote < 0) held.failed(errno);
      break;
    }
  }
  return done;
}

SigpipeHeld::SigpipeHeld() noexcept {
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &before_);
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
}

SigpipeHeld::~SigpipeHeld() {
  const int error = errno;
  if (raised_ && !was_pending_) {
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    const timespec now{};
    while (sigtimedwait(&pipe_signal, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &before_, nullptr);
  errno = error;
}

std::string errno_text(int error) {
  char buffer[256];
  // GNU strerror_r returns the message, which may or may not be `buffer`.
  return strerror_r(error, buffer, sizeof(buffer));
}

std::string executable_path() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

std::string current_directory() {
  char path[4096];
  return getcwd(path, sizeof(path)) != nullptr ? std::string(path) : std::string("/");
}

}  // namespace cohort::detail

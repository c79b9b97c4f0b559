// Owning file descriptor, and the syscall conventions every part follows:
// retry EINTR, open everything O_CLOEXEC, never raise SIGPIPE (MSG_NOSIGNAL).
#pragma once

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include <signal.h>

namespace cohort::detail {

/// A file descriptor closed on destruction; movable, not copyable.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

/// Calls `call` until it does not fail with EINTR; returns its last result.
template <class Call>
auto retry_eintr(Call call) {
  for (;;) {
    auto result = call();
    if (!(result == -1 && errno == EINTR)) return result;
  }
}

/// Writes all of `bytes` to `fd`, retrying EINTR: 0, or the errno of the
/// write that failed (EIO for one that wrote nothing).
int write_all(int fd, std::string_view bytes) noexcept;

/// Writes what `fd` takes at once and returns how many bytes that was:
/// pwritev2 with RWF_NOWAIT, which a pipe, a socket or /dev/null with room
/// takes; a full one takes nothing, and a descriptor that cannot write
/// without waiting (a terminal, most regular files) refuses it, so 0. A
/// reader that is gone ends it with no SIGPIPE (SigpipeHeld).
std::size_t write_without_waiting(int fd, std::string_view bytes) noexcept;

/// Holds back the SIGPIPE that a call with no MSG_NOSIGNAL (sendfile, a
/// write to a pipe) raises in this thread when its reader is gone: blocks
/// SIGPIPE while it lives, and on destruction takes the one the call raised
/// (`failed(EPIPE)` says it did) unless one was pending before, from
/// elsewhere; then restores the signal mask.
class SigpipeHeld {
 public:
  SigpipeHeld() noexcept;
  ~SigpipeHeld();
  SigpipeHeld(const SigpipeHeld&) = delete;
  SigpipeHeld& operator=(const SigpipeHeld&) = delete;
  /// The call failed with `error`.
  void failed(int error) noexcept { raised_ = raised_ || error == EPIPE; }

 private:
  sigset_t before_;
  bool was_pending_ = false;
  bool raised_ = false;
};

/// Sets O_NONBLOCK; throws cohort::Error naming `what` on failure.
void set_nonblocking(int fd, const char* what);

/// strerror(error) as a string, thread-safe.
std::string errno_text(int error);

/// This process's executable (/proc/self/exe resolved), or "" when unknown.
std::string executable_path();

/// This process's working directory, or "/" when it cannot be read.
std::string current_directory();

}  // namespace cohort::detail

#include "core/fd.hpp"

#include <cstring>

#include <fcntl.h>
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

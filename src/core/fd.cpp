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

std::string errno_text(int error) {
  char buffer[256];
  // GNU strerror_r returns the message, which may or may not be `buffer`.
  return strerror_r(error, buffer, sizeof(buffer));
}

}  // namespace cohort::detail

#include "core/socket.hpp"

#include <cstring>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

int millis_until(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, Deadline deadline, std::string* error) {
  pollfd entry{fd, events, 0};
  for (;;) {
    const int timeout = millis_until(deadline);
    const int n = poll(&entry, 1, timeout);
    if (n > 0) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = "poll failed: " + errno_text(errno);
      return false;
    }
    if (timeout == 0) {
      *error = "timed out";
      return false;
    }
  }
}

bool resolve(const std::string& host, int port, sockaddr_in* out, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    *error = cat(host, " does not resolve: ", gai_strerror(rc));
    return false;
  }
  std::memcpy(out, result->ai_addr, sizeof(*out));
  freeaddrinfo(result);
  return true;
}

}  // namespace

Deadline deadline_after(std::chrono::milliseconds timeout) noexcept {
  const Deadline now = Clock::now();
  if (timeout.count() <= 0) return now;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now);
  if (timeout >= room) return Deadline::max();
  return now + timeout;
}

std::chrono::milliseconds saturating_sum(std::chrono::milliseconds a,
                                         std::chrono::milliseconds b) noexcept {
  using std::chrono::milliseconds;
  if (a.count() < 0) a = milliseconds(0);
  if (b.count() < 0) b = milliseconds(0);
  return a > milliseconds::max() - b ? milliseconds::max() : a + b;
}

Listener listen_tcp(const std::string& host, int port, int backlog) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  std::string error;
  if (host.empty() || host == "0.0.0.0") {
    address.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (!resolve(host, port, &address, &error)) {
    throw Error(cat("cannot listen on ", host, ":", port, ": ", error));
  }
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) throw Error(cat("socket() for ", host, ":", port, ": ", errno_text(errno)));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int bind_errno = errno;
    throw Error(cat("cannot listen on ", host.empty() ? "0.0.0.0" : host, ":", port, ": ",
                    errno_text(bind_errno),
                    bind_errno == EADDRINUSE ? " (another process holds the port: pick another, "
                                               "or leave it to the OS with port 0)"
                                             : ""));
  }
  if (listen(fd.get(), backlog) != 0) {
    throw Error(cat("listen() on port ", port, ": ", errno_text(errno)));
  }
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  return {std::move(fd), ntohs(bound.sin_port)};
}

Fd connect_tcp(const std::string& host, int port, Deadline deadline, std::string* error) {
  sockaddr_in address{};
  if (!resolve(host, port, &address, error)) return Fd();
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    *error = "socket() failed: " + errno_text(errno);
    return Fd();
  }
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    if (errno != EINPROGRESS) {
      *error = errno_text(errno);
      return Fd();
    }
    if (!wait_ready(fd.get(), POLLOUT, deadline, error)) return Fd();
    int so_error = 0;
    socklen_t length = sizeof(so_error);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &length);
    if (so_error != 0) {
      *error = errno_text(so_error);
      return Fd();
    }
  }
  const int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

bool send_all(int fd, const void* data, std::size_t size, Deadline deadline, std::string* error) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes += n;
      size -= static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLOUT, deadline, error)) return false;
    } else if (n < 0 && errno != EINTR) {
      *error = errno == EPIPE || errno == ECONNRESET ? "closed the connection" : errno_text(errno);
      return false;
    }
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t size, Deadline deadline, std::string* error) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd, bytes, size, MSG_DONTWAIT);
    if (n > 0) {
      bytes += n;
      size -= static_cast<std::size_t>(n);
    } else if (n == 0) {
      *error = "closed the connection";
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLIN, deadline, error)) return false;
    } else if (errno != EINTR) {
      *error = errno == ECONNRESET ? "closed the connection" : errno_text(errno);
      return false;
    }
  }
  return true;
}

std::string peer_name(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return cat(text, ":", ntohs(address.sin_port));
}

int pick_free_port(const std::string& host) {
  return listen_tcp(host, 0, 1).port;
}

long raise_open_file_limit() noexcept {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return static_cast<long>(limit.rlim_cur);
}

}  // namespace cohort::detail

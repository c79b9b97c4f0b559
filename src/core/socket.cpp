#include "core/socket.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

// Rounded up: a wait that ends with it has reached its deadline.
int millis_until(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// An address of `host` (IPv4 preferred, as every name the tests and most
// clusters use has one; IPv6 when that is all it has: "::1").
struct Resolved {
  sockaddr_storage address{};
  socklen_t length = 0;
  int family = AF_INET;
};

bool resolve(const std::string& host, int port, Resolved* out, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // "[::1]" as in host:port notation, or a bare literal.
  const std::string name = host.size() > 2 && host.front() == '[' && host.back() == ']'
                               ? host.substr(1, host.size() - 2)
                               : host;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(name.empty() ? nullptr : name.c_str(), service.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    *error = cat(host, " does not resolve: ", rc != 0 ? gai_strerror(rc) : "no address");
    return false;
  }
  const addrinfo* chosen = result;
  for (const addrinfo* entry = result; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family == AF_INET) {
      chosen = entry;
      break;
    }
  }
  std::memcpy(&out->address, chosen->ai_addr, chosen->ai_addrlen);
  out->length = chosen->ai_addrlen;
  out->family = chosen->ai_family;
  freeaddrinfo(result);
  return true;
}

// recv_into_file without a pipe (none to be had): a piece at a time
// through a buffer that stays in the cache.
bool recv_into_file_through_memory(int fd, int file, std::size_t size, Deadline deadline,
                                   std::string* error, std::string* file_error) {
  std::string piece;
  for (std::size_t left = size; left > 0;) {
    piece.resize(std::min<std::size_t>(left, 64 << 10));
    if (!recv_all(fd, piece.data(), piece.size(), deadline, error)) return false;
    left -= piece.size();
    if (file_error->empty()) {
      if (const int failed = write_all(file, piece); failed != 0)
        *file_error = cat("writing an answer file: ", errno_text(failed));
    }
  }
  return true;
}

// net.core.rmem_max: the most SO_RCVBUF may ask for (0 when unreadable).
std::size_t receive_buffer_limit() {
  static const std::size_t kLimit = [] {
    std::size_t value = 0;
    if (FILE* file = std::fopen("/proc/sys/net/core/rmem_max", "re")) {
      if (std::fscanf(file, "%zu", &value) != 1) value = 0;
      std::fclose(file);
    }
    return value;
  }();
  return kLimit;
}

// Sets SO_RCVBUF to `wanted` (as far as rmem_max allows) where that is
// more than the socket has: setting it ends the kernel's tuning of the
// buffer, so never to less.
void raise_receive_buffer(int fd, std::size_t wanted) {
  const std::size_t allowed = std::min(wanted, receive_buffer_limit());
  int current = 0;
  socklen_t length = sizeof(current);
  if (allowed == 0 || getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &current, &length) != 0) return;
  // The kernel reports, and gives, twice what is asked (its bookkeeping).
  if (2 * allowed <= static_cast<std::size_t>(current)) return;
  const int size = static_cast<int>(std::min<std::size_t>(allowed, INT32_MAX / 2));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

}  // namespace

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
  Resolved resolved;
  std::string error;
  if (host.empty() || host == "0.0.0.0") {
    auto* any = reinterpret_cast<sockaddr_in*>(&resolved.address);
    any->sin_family = AF_INET;
    any->sin_port = htons(static_cast<uint16_t>(port));
    any->sin_addr.s_addr = htonl(INADDR_ANY);
    resolved.length = sizeof(sockaddr_in);
  } else if (!resolve(host, port, &resolved, &error)) {
    throw Error(cat("cannot listen on ", host, ":", port, ": ", error));
  }
  Fd fd(socket(resolved.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) throw Error(cat("socket() for ", host, ":", port, ": ", errno_text(errno)));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&resolved.address), resolved.length) != 0) {
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
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  return {std::move(fd), bound_port};
}

Fd connect_tcp(const std::string& host, int port, Deadline deadline, std::string* error,
               std::size_t receive_buffer) {
  Resolved resolved;
  if (!resolve(host, port, &resolved, error)) return Fd();
  Fd fd(socket(resolved.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    *error = "socket() failed: " + errno_text(errno);
    return Fd();
  }
  if (receive_buffer > 0) raise_receive_buffer(fd.get(), receive_buffer);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&resolved.address), resolved.length) !=
      0) {
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
  return recv_all(fd, data, size, deadline, error, nullptr);
}

bool recv_all(int fd, void* data, std::size_t size, Deadline deadline, std::string* error,
              std::vector<Fd>* files) {
  char* bytes = static_cast<char*>(data);
  constexpr std::size_t kMaxFiles = 4;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFiles)];
  while (size > 0) {
    iovec part{bytes, size};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    if (files != nullptr) {  // else the kernel closes any that came
      message.msg_control = control;
      message.msg_controllen = sizeof(control);
    }
    const ssize_t n = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0) {
      for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
           header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int received = -1;
          std::memcpy(&received, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
          files->emplace_back(received);
        }
      }
    }
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

bool recv_into_file(int fd, int file, std::size_t size, Deadline deadline, std::string* error,
                    std::string* file_error) {
  if (size == 0) return true;
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0)
    return recv_into_file_through_memory(fd, file, size, deadline, error, file_error);
  const Fd from_pipe(ends[0]), into_pipe(ends[1]);
  // Fewer turns for a large answer; the default (64 KiB) when refused.
  (void)fcntl(into_pipe.get(), F_SETPIPE_SZ, 1 << 20);
  std::string dropped;  // what the file could not take
  while (size > 0) {
    const ssize_t n =
        splice(fd, nullptr, into_pipe.get(), nullptr, size, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n == 0) {
      *error = "closed the connection";
      return false;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        *error = errno == ECONNRESET ? "closed the connection" : errno_text(errno);
        return false;
      }
      if (!wait_ready(fd, POLLIN, deadline, error)) return false;
      continue;
    }
    size -= static_cast<std::size_t>(n);
    // The pipe is emptied before the next turn, so that the next splice
    // waits only for the socket.
    for (auto in_pipe = static_cast<std::size_t>(n); in_pipe > 0;) {
      ssize_t m = -1;
      if (file_error->empty()) {
        m = splice(from_pipe.get(), nullptr, file, nullptr, in_pipe, SPLICE_F_MOVE);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) *file_error = cat("writing an answer file: ", errno_text(m < 0 ? errno : EIO));
      }
      if (m <= 0) {
        dropped.resize(in_pipe);
        m = read(from_pipe.get(), dropped.data(), in_pipe);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) {
          *error = cat("reading a pipe of a large answer: ", errno_text(errno));
          return false;
        }
      }
      in_pipe -= static_cast<std::size_t>(m);
    }
  }
  return true;
}

long send_with_file(int fd, const void* data, std::size_t size, int file) noexcept {
  iovec part{const_cast<void*>(data), size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &file, sizeof(int));
  return sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
}

long send_file_part(int fd, int file, std::size_t offset, std::size_t size) noexcept {
  // sendfile has no MSG_NOSIGNAL: the SIGPIPE a closed peer raises is sent
  // to this thread.
  SigpipeHeld held;
  off_t at = static_cast<off_t>(offset);
  const ssize_t sent = sendfile(fd, file, &at, size);
  if (sent < 0) held.failed(errno);
  return sent;
}

std::string peer_name(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return cat("[", text, "]:", ntohs(v6->sin6_port));
  }
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
  inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  return cat(text, ":", ntohs(v4->sin_port));
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

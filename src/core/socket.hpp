// TCP helpers over blocking sockets with deadlines (poll), for the store's
// client and server and the launcher. IPv4, and IPv6 where a host has no
// IPv4 address ("::1", "[::1]"); every error names host:port.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/fd.hpp"

namespace cohort::detail {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// now + `timeout`, saturating: a timeout too long to represent (a century,
/// milliseconds::max()) is a deadline that never comes, not an overflow.
Deadline deadline_after(std::chrono::milliseconds timeout) noexcept;

/// a + b for non-negative durations, saturating at milliseconds::max().
std::chrono::milliseconds saturating_sum(std::chrono::milliseconds a,
                                         std::chrono::milliseconds b) noexcept;

struct Listener {
  Fd fd;
  int port = 0;  ///< the bound port (the one the OS picked for port 0)
};

/// A non-blocking listening socket on host:port ("" or "0.0.0.0": every
/// interface; port 0: any free port). Throws cohort::Error naming host:port.
Listener listen_tcp(const std::string& host, int port, int backlog = 4096);

/// One connection attempt to host:port that gives up at `deadline`. On
/// failure returns an invalid Fd and describes why in `*error`
/// ("connection refused", "n1 does not resolve: ...").
///
/// `receive_buffer`, when larger than the socket's default: its receive
/// buffer (SO_RCVBUF, set before the handshake so that the window scale
/// allows it; the kernel caps it at net.core.rmem_max). For a connection
/// that receives large values whole: the default window (64 KiB from
/// tcp_rmem's 128 KiB) grows only as data arrives, a round trip and a
/// wake-up of the sender at a time.
Fd connect_tcp(const std::string& host, int port, Deadline deadline, std::string* error,
               std::size_t receive_buffer = 0);

/// Sends every byte before `deadline` (MSG_NOSIGNAL: a closed peer is an
/// error, not a SIGPIPE). False with `*error` set on failure.
bool send_all(int fd, const void* data, std::size_t size, Deadline deadline, std::string* error);

/// Waits until `fd` is ready for `events` (poll's) or `deadline` passes:
/// false with `*error` ("timed out") then.
bool wait_ready(int fd, short events, Deadline deadline, std::string* error);

/// Receives exactly `size` bytes before `deadline`. False with `*error` set
/// on failure; "closed the connection" when the peer did.
bool recv_all(int fd, void* data, std::size_t size, Deadline deadline, std::string* error);

/// recv_all on a Unix socket that may carry descriptors (SCM_RIGHTS): each
/// one that comes with the bytes read is appended to `*files`
/// (close-on-exec); with `files` null, the kernel closes them.
bool recv_all(int fd, void* data, std::size_t size, Deadline deadline, std::string* error,
              std::vector<Fd>* files);

/// Receives exactly `size` bytes from the socket `fd` before `deadline` and
/// appends them to `file` at its offset, through a pipe (splice: the bytes
/// are not copied through this process). False with `*error` set when the
/// socket fails, as recv_all. When `file` cannot take them, the bytes are
/// still read, and dropped, and `*file_error` says why (its first failure).
bool recv_into_file(int fd, int file, std::size_t size, Deadline deadline, std::string* error,
                    std::string* file_error);

/// One non-blocking send of up to `size` bytes with descriptor `file`
/// attached (SCM_RIGHTS; a Unix socket only): what send() returns. The
/// file goes with the bytes sent, once any is.
long send_with_file(int fd, const void* data, std::size_t size, int file) noexcept;

/// One send of up to `size` bytes of `file` from `offset` to the socket `fd`
/// (sendfile: the bytes go from the file's pages, not through a buffer of
/// this process; a non-blocking socket's call returns at once): what
/// sendfile() returns. A closed peer is EPIPE, not a SIGPIPE, as with
/// MSG_NOSIGNAL. The file's bytes must not change until they are received.
long send_file_part(int fd, int file, std::size_t offset, std::size_t size) noexcept;

/// "10.0.0.1:4242" for the peer of a connected socket.
std::string peer_name(int fd);

/// A TCP port that was free on `host` a moment ago (bound, then released).
/// For ports handed to another program to bind (MASTER_PORT); racy by nature.
int pick_free_port(const std::string& host = "0.0.0.0");

/// Raises this process's soft open-file limit to its hard limit, so that a
/// server can hold thousands of connections. Returns the new soft limit.
long raise_open_file_limit() noexcept;

}  // namespace cohort::detail

// Who is at the other end of a TCP connection, when it is this host: the
// kernel knows which user owns every socket (what `ss -e` shows), so a
// server can refuse local peers that are not its own user without any
// secret. SO_PEERCRED answers this for Unix sockets only; for TCP the
// answer comes from the socket-diagnostics netlink (sock_diag).
#pragma once

#include <cstdint>
#include <string>

#include <sys/types.h>

namespace cohort::detail {

struct PeerOwner {
  enum class Where {
    this_host,  ///< the peer's socket is in this network namespace; `uid` owns it
    elsewhere,  ///< no such socket here: the peer is another host (or namespace)
    unknown,    ///< the kernel could not be asked; `error` says why
  };
  Where where = Where::unknown;
  uid_t uid = 0;
  /// The peer socket's inode (`socket:[inode]` in its process's fd table);
  /// 0 while it waits in its listener's backlog, not yet accepted.
  std::uint64_t inode = 0;
  std::string error;
};

/// The owner of the peer socket of connected TCP socket `fd` (IPv4 or
/// IPv6). Never
/// throws. One netlink round trip, independent of how many sockets exist.
PeerOwner owner_of_peer(int fd);

/// Process `pid` as another process can recognise it later: "pid:start",
/// `start` its start time in clock ticks since boot (/proc/PID/stat), so
/// that neither a reused pid nor the same number in another pid namespace
/// passes for it. "" when /proc has no such process.
std::string process_identity(pid_t pid);

enum class SocketHolding {
  holds,        ///< the socket is among the process's descriptors
  not_held,     ///< the process is here, and the socket is not among them
  cannot_tell,  ///< no such process here (gone, another pid namespace), or unreadable
};

/// Whether the process `identity` names (process_identity's form) holds the
/// socket whose inode is `inode`: one look at its /proc/PID/fd.
SocketHolding process_holding(const std::string& identity, std::uint64_t inode);

}  // namespace cohort::detail

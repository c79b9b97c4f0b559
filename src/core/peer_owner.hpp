// Who is at the other end of a TCP connection, when it is this host: the
// kernel knows which user owns every socket (what `ss -e` shows), so a
// server can refuse local peers that are not its own user without any
// secret. SO_PEERCRED answers this for Unix sockets only; for TCP the
// answer comes from the socket-diagnostics netlink (sock_diag).
#pragma once

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
  std::string error;
};

/// The owner of the peer socket of connected TCP socket `fd` (IPv4 or
/// IPv6). Never
/// throws. One netlink round trip, independent of how many sockets exist.
PeerOwner owner_of_peer(int fd);

}  // namespace cohort::detail

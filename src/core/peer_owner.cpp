#include "core/peer_owner.hpp"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

PeerOwner owner_of_peer(int fd) {
  PeerOwner owner;
  sockaddr_storage peer{};
  sockaddr_storage self{};
  socklen_t peer_size = sizeof(peer);
  socklen_t self_size = sizeof(self);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_size) != 0) {
    owner.error = cat("getpeername/getsockname: ", errno_text(errno));
    return owner;
  }
  if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) {
    owner.error = "not a TCP/IP connection";
    return owner;
  }
  Fd diag(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!diag.valid()) {
    owner.error = cat("netlink sock_diag: ", errno_text(errno));
    return owner;
  }
  // Looks up the one socket whose local end is the peer's address and whose
  // remote end is ours: the peer's own socket, if it lives here.
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof(message);
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.request.sdiag_family = static_cast<std::uint8_t>(peer.ss_family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0u;
  if (peer.ss_family == AF_INET6) {
    const auto& from = reinterpret_cast<const sockaddr_in6&>(peer);
    const auto& to = reinterpret_cast<const sockaddr_in6&>(self);
    message.request.id.idiag_sport = from.sin6_port;
    message.request.id.idiag_dport = to.sin6_port;
    std::memcpy(message.request.id.idiag_src, &from.sin6_addr, sizeof(from.sin6_addr));
    std::memcpy(message.request.id.idiag_dst, &to.sin6_addr, sizeof(to.sin6_addr));
  } else {
    const auto& from = reinterpret_cast<const sockaddr_in&>(peer);
    const auto& to = reinterpret_cast<const sockaddr_in&>(self);
    message.request.id.idiag_sport = from.sin_port;
    message.request.id.idiag_dport = to.sin_port;
    std::memcpy(message.request.id.idiag_src, &from.sin_addr, sizeof(from.sin_addr));
    std::memcpy(message.request.id.idiag_dst, &to.sin_addr, sizeof(to.sin_addr));
  }
  message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (retry_eintr([&] {
        return sendto(diag.get(), &message, sizeof(message), 0,
                      reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel));
      }) < 0) {
    owner.error = cat("netlink sock_diag request: ", errno_text(errno));
    return owner;
  }
  alignas(nlmsghdr) char reply[8192];
  const ssize_t n = retry_eintr([&] { return recv(diag.get(), reply, sizeof(reply), 0); });
  if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) {
    owner.error = cat("netlink sock_diag reply: ", n < 0 ? errno_text(errno) : "too short");
    return owner;
  }
  const auto* header = reinterpret_cast<const nlmsghdr*>(reply);
  if (!NLMSG_OK(header, static_cast<unsigned>(n))) {
    owner.error = "netlink sock_diag reply: malformed";
    return owner;
  }
  if (header->nlmsg_type == NLMSG_ERROR) {
    const auto* failure = static_cast<const nlmsgerr*>(NLMSG_DATA(header));
    if (failure->error == -ENOENT) {
      owner.where = PeerOwner::Where::elsewhere;
    } else {
      owner.error = cat("netlink sock_diag: ", errno_text(-failure->error));
    }
    return owner;
  }
  if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
    owner.error = "netlink sock_diag reply: unexpected message";
    return owner;
  }
  const auto* found = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
  owner.where = PeerOwner::Where::this_host;
  owner.uid = found->idiag_uid;
  owner.inode = found->idiag_inode;
  return owner;
}

std::string process_identity(pid_t pid) {
  std::ifstream file(cat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // Fields after the command, which may hold spaces and parentheses:
  // state is field 3, the start time field 22.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return cat(pid, ":", field);
  }
  return {};
}

SocketHolding process_holding(const std::string& identity, std::uint64_t inode) {
  const std::size_t colon = identity.find(':');
  const auto pid = parse_int(identity.substr(0, colon));
  if (colon == std::string::npos || !pid || *pid <= 0 || inode == 0 ||
      process_identity(static_cast<pid_t>(*pid)) != identity) {
    return SocketHolding::cannot_tell;
  }
  const std::string wanted = cat("socket:[", inode, "]");
  std::error_code error;
  std::filesystem::directory_iterator fds(cat("/proc/", *pid, "/fd"), error);
  if (error) return SocketHolding::cannot_tell;
  for (; fds != std::filesystem::directory_iterator(); fds.increment(error)) {
    char target[64];
    const ssize_t n = readlink(fds->path().c_str(), target, sizeof(target));
    if (n > 0 && std::string_view(target, static_cast<std::size_t>(n)) == wanted) {
      return SocketHolding::holds;
    }
  }
  return error ? SocketHolding::cannot_tell : SocketHolding::not_held;
}

}  // namespace cohort::detail

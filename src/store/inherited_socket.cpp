#include "store/inherited_socket.hpp"

#include <atomic>
#include <climits>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "core/peer_owner.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

std::optional<int> parse_store_fd(std::string_view text) noexcept {
  if (text.empty() || text.size() > 10) return std::nullopt;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  const auto number = parse_int(text);
  if (!number || *number < 3 || *number > INT_MAX) return std::nullopt;
  return static_cast<int>(*number);
}

int take_inherited_store_socket(std::string_view text, std::string_view store_process) {
  static std::atomic<bool> taken{false};
  const std::optional<int> fd = parse_store_fd(text);
  if (!fd || store_process.empty()) return -1;
  struct stat status {};
  int domain = 0;
  socklen_t length = sizeof(domain);
  ucred peer{};
  socklen_t peer_length = sizeof(peer);
  if (fstat(*fd, &status) != 0 || !S_ISSOCK(status.st_mode) ||
      getsockopt(*fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 || domain != AF_UNIX ||
      getsockopt(*fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0 ||
      process_identity(peer.pid) != store_process) {
    return -1;
  }
  if (taken.exchange(true)) return -1;
  fcntl(*fd, F_SETFD, FD_CLOEXEC);
  return *fd;
}

}  // namespace cohort::detail

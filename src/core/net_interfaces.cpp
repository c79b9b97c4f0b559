#include "core/net_interfaces.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

std::string ipv4_text(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return text;
}

// getaddrinfo with a deadline: a misconfigured resolver must not make a
// diagnostic command hang for the resolver's full retry schedule.
bool resolve_ipv4(const std::string& host, std::chrono::milliseconds timeout, sockaddr_in* out,
                  std::string* error) {
  // On the heap: a lookup that outlives the deadline and cannot be cancelled
  // still writes into it from glibc's thread, so it is then left allocated.
  struct Lookup {
    std::string name;
    addrinfo hints{};
    gaicb request{};
  };
  auto lookup = std::make_unique<Lookup>();
  lookup->name = host;
  lookup->hints.ai_family = AF_INET;
  lookup->hints.ai_socktype = SOCK_DGRAM;
  lookup->request.ar_name = lookup->name.c_str();
  lookup->request.ar_request = &lookup->hints;
  gaicb* requests[] = {&lookup->request};
  if (int rc = getaddrinfo_a(GAI_NOWAIT, requests, 1, nullptr); rc != 0) {
    *error = cat(host, " does not resolve: ", gai_strerror(rc));
    return false;
  }
  // gai_suspend may wake before the lookup is done (a signal, another lookup
  // finishing): wait again with what is left of the timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const gaicb* waiting[] = {&lookup->request};
  int rc = gai_error(&lookup->request);
  while (rc == EAI_INPROGRESS) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    timespec wait{};
    wait.tv_sec = static_cast<time_t>(left.count() / 1000000000);
    wait.tv_nsec = static_cast<long>(left.count() % 1000000000);
    gai_suspend(waiting, 1, &wait);
    rc = gai_error(&lookup->request);
  }
  if (rc == EAI_INPROGRESS) {
    if (gai_cancel(&lookup->request) != EAI_CANCELED) {
      static_cast<void>(lookup.release());  // glibc's thread still writes into it: see Lookup
    }
    *error = cat(host, " did not resolve within ", timeout.count(), " ms");
    return false;
  }
  if (rc != 0) {
    *error = cat(host, " does not resolve: ", gai_strerror(rc));
    return false;
  }
  std::memcpy(out, lookup->request.ar_result->ai_addr, sizeof(sockaddr_in));
  freeaddrinfo(lookup->request.ar_result);
  return true;
}

bool resolve_ipv4_in_place(const std::string& host, sockaddr_in* out, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || !found) {
    *error = cat(host, " does not resolve: ", rc != 0 ? gai_strerror(rc) : "no address");
    return false;
  }
  std::memcpy(out, found->ai_addr, sizeof(sockaddr_in));
  freeaddrinfo(found);
  return true;
}

// The kernel's route to `host`, which `resolve(&address, &error)` resolves
// unless it is a dotted quad: that needs no lookup (getaddrinfo_a starts a
// thread for one).
template <class Resolve>
Route route_with(const std::string& host, Resolve&& resolve) {
  Route route;
  sockaddr_in target{};
  if (inet_pton(AF_INET, host.c_str(), &target.sin_addr) == 1) {
    target.sin_family = AF_INET;
  } else if (!resolve(&target, &route.error)) {
    return route;
  }
  route.host_address = ipv4_text(target);
  target.sin_port = htons(9);  // any port: connect() on UDP only picks a route

  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    route.error = cat("socket(AF_INET, SOCK_DGRAM) failed: ", std::strerror(errno));
    return route;
  }
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
    route.error = cat("no route to ", host, " (", route.host_address, "): ", std::strerror(errno));
  } else if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    route.error = cat("getsockname failed: ", std::strerror(errno));
  } else {
    route.found = true;
    route.source_address = ipv4_text(local);
  }
  close(fd);
  if (!route.found) return route;
  for (const NetInterface& candidate : ipv4_interfaces()) {
    if (candidate.ipv4 == route.source_address) {
      route.interface = candidate.name;
      break;
    }
  }
  return route;
}

}  // namespace

std::vector<NetInterface> ipv4_interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    throw Error(cat("getifaddrs failed: ", std::strerror(errno)));
  }
  std::vector<NetInterface> out;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    sockaddr_in address{};
    std::memcpy(&address, entry->ifa_addr, sizeof(address));
    out.push_back({entry->ifa_name, ipv4_text(address), (entry->ifa_flags & IFF_UP) != 0,
                   (entry->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return out;
}

Route route_to(const std::string& host, std::chrono::milliseconds resolve_timeout) {
  return route_with(host, [&](sockaddr_in* out, std::string* error) {
    return resolve_ipv4(host, resolve_timeout, out, error);
  });
}

Route route_to_resolving_in_place(const std::string& host) {
  return route_with(host, [&](sockaddr_in* out, std::string* error) {
    return resolve_ipv4_in_place(host, out, error);
  });
}

std::string listen_address_for(const std::string& host, std::string* why) {
  // Plain getaddrinfo, not getaddrinfo_a: an agent that called this forks
  // cohort::spawn workers, and glibc's asynchronous lookups do not survive
  // a fork (the child's next lookup would wait for a thread that is gone).
  const std::string name = host.size() > 2 && host.front() == '[' && host.back() == ']'
                               ? host.substr(1, host.size() - 2)
                               : host;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &found); rc != 0 || !found) {
    *why = cat(host, " does not resolve: ", rc != 0 ? gai_strerror(rc) : "no address");
    return "";
  }
  // IPv4 when the name has it (as connect_tcp prefers), else IPv6.
  const addrinfo* chosen = found;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family == AF_INET) {
      chosen = entry;
      break;
    }
  }
  std::string text;
  bool local = false;
  if (chosen->ai_family == AF_INET6) {
    const in6_addr address = reinterpret_cast<const sockaddr_in6*>(chosen->ai_addr)->sin6_addr;
    char buffer[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, &address, buffer, sizeof(buffer));
    text = buffer;
    local = IN6_IS_ADDR_LOOPBACK(&address);
    ifaddrs* interfaces = nullptr;
    if (!local && getifaddrs(&interfaces) == 0) {
      for (const ifaddrs* entry = interfaces; entry != nullptr && !local; entry = entry->ifa_next) {
        if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET6) continue;
        local = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr)->sin6_addr,
                            &address, sizeof(address)) == 0;
      }
      freeifaddrs(interfaces);
    }
  } else {
    sockaddr_in address = *reinterpret_cast<const sockaddr_in*>(chosen->ai_addr);
    text = ipv4_text(address);
    local = (ntohl(address.sin_addr.s_addr) >> 24) == 127;
    try {
      for (const NetInterface& interface : ipv4_interfaces())
        local = local || interface.ipv4 == text;
    } catch (const Error& error) {
      freeaddrinfo(found);
      *why = error.what();
      return "";
    }
  }
  freeaddrinfo(found);
  if (local) return text;
  *why = cat(host, " (", text, ") is not an address of this host");
  return "";
}

}  // namespace cohort::detail

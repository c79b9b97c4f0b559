// The machine's IPv4 interfaces, and which one the kernel would use to reach
// a given host. Used to show and to choose the network interface (the
// `cohort env` report now, the communicator's interface choice later).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace cohort::detail {

struct NetInterface {
  std::string name;  ///< "eth0"
  std::string ipv4;  ///< "10.0.0.5"
  bool up = false;   ///< IFF_UP
  bool loopback = false;
};

/// Every interface that has an IPv4 address, in the kernel's order (one entry
/// per address). Throws cohort::Error naming getifaddrs and errno on failure.
std::vector<NetInterface> ipv4_interfaces();

/// The kernel's route from this machine to `host`.
struct Route {
  bool found = false;
  std::string host_address;    ///< `host` resolved ("10.0.0.1")
  std::string source_address;  ///< the local address packets to it would leave from
  std::string interface;       ///< the interface holding that address ("" if none matches)
  std::string error;           ///< why `found` is false: "n1 does not resolve: ..."
};

/// Resolves `host` (waiting at most `resolve_timeout` for DNS) and asks the
/// kernel which local address reaches it, by connecting a UDP socket: no
/// packet is sent. Never throws; failures are described in `Route::error`.
Route route_to(const std::string& host,
               std::chrono::milliseconds resolve_timeout = std::chrono::seconds(2));

/// route_to, resolving `host` with plain getaddrinfo: no thread, and no
/// bound but the resolver's own. For cohort run's agent, which resolves
/// the same names with getaddrinfo to reach the store anyway, and which
/// forks workers without exec (cohort::spawn): glibc's asynchronous lookups
/// do not survive a fork, and their thread took 1-6 ms of a 4-node start
/// on a 2-vCPU VM (docs/measurements/launch.md).
Route route_to_resolving_in_place(const std::string& host);

/// Where a server should listen so that its peers reach it at `host` and
/// nobody reaches it any other way: `host` resolved, when that is loopback or
/// one of this machine's addresses; "" when it is not (behind NAT, or a name
/// for another machine), and `*why` says so. Never throws.
std::string listen_address_for(const std::string& host, std::string* why);

}  // namespace cohort::detail

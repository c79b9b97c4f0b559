// Which local address a rank offers its peers for collectives, and why:
// the interface named by COHORT_IFNAME, else GLOO_SOCKET_IFNAME, else the one
// that routes to the master, else loopback. `cohort env` shows the choice.
#pragma once

#include <string>

#include <cohort/launch_env.hpp>

namespace cohort::detail {

struct InterfaceChoice {
  std::string address;    ///< IPv4 address peers connect to
  std::string interface;  ///< its interface ("" when not known)
  std::string reason;  ///< "COHORT_IFNAME", "GLOO_SOCKET_IFNAME", "route to the master", "loopback"
};

/// Throws InvalidArgument when a variable names no interface with an IPv4
/// address (listing those there are).
InterfaceChoice choose_interface(const LaunchInfo& info, const Environment& env);

}  // namespace cohort::detail

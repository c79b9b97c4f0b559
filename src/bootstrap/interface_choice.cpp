#include "bootstrap/interface_choice.hpp"

#include <vector>

#include <cohort/errors.hpp>

#include "core/net_interfaces.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

InterfaceChoice choose_interface(const LaunchInfo& info, const Environment& env) {
  for (const char* variable : {"COHORT_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    const auto found = env.find(variable);
    if (found == env.end() || found->second.empty()) continue;
    std::vector<std::string> known;
    for (const NetInterface& interface : ipv4_interfaces()) {
      if (interface.name == found->second) return {interface.ipv4, interface.name, variable};
      known.push_back(interface.name);
    }
    throw InvalidArgument(
        cat(variable, "=", found->second,
            " names no interface with an IPv4 address here; this host has: ", join(known, ", ")));
  }
  if (!info.master_addr.value.empty()) {
    const Route route = route_to(info.master_addr.value);
    if (route.found) return {route.source_address, route.interface, "route to the master"};
  } else if (info.world_size.value > 1) {
    // Rank 0 under mpirun on several nodes: nothing to route to yet.
    for (const NetInterface& interface : ipv4_interfaces()) {
      if (interface.up && !interface.loopback) {
        return {interface.ipv4, interface.name,
                "first interface that is up (set COHORT_IFNAME to choose)"};
      }
    }
  }
  return {"127.0.0.1", "lo", "loopback"};
}

}  // namespace cohort::detail

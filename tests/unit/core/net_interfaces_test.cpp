#include "core/net_interfaces.hpp"

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

TEST(NetInterfaces, ListsLoopback) {
  bool found = false;
  for (const NetInterface& interface : ipv4_interfaces()) {
    if (interface.loopback && interface.ipv4 == "127.0.0.1") found = interface.up;
  }
  EXPECT_TRUE(found) << "no up loopback interface with 127.0.0.1";
}

TEST(RouteTo, LoopbackGoesThroughTheLoopbackInterface) {
  const Route route = route_to("127.0.0.1");
  ASSERT_TRUE(route.found) << route.error;
  EXPECT_EQ(route.host_address, "127.0.0.1");
  EXPECT_EQ(route.source_address, "127.0.0.1");
  EXPECT_FALSE(route.interface.empty());
  const Route named = route_to("localhost");
  ASSERT_TRUE(named.found) << named.error;
  EXPECT_EQ(named.interface, route.interface);
}

TEST(RouteTo, AnUnknownNameSaysSo) {
  // .invalid never resolves (RFC 2606).
  const Route route = route_to("no-such-host.invalid");
  EXPECT_FALSE(route.found);
  EXPECT_NE(route.error.find("no-such-host.invalid"), std::string::npos) << route.error;
}

}  // namespace
}  // namespace cohort::detail

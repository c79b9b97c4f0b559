#include "core/net_interfaces.hpp"

#include <filesystem>

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

// The threads of this process now.
std::size_t thread_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
    ++count;
  return count;
}

// Before the tests of route_to, whose lookups start glibc's resolver thread.
TEST(RouteToResolvingInPlace, FindsTheRouteWithoutAThread) {
  const std::size_t before = thread_count();
  const Route named = route_to_resolving_in_place("localhost");
  ASSERT_TRUE(named.found) << named.error;
  EXPECT_EQ(named.source_address.rfind("127.", 0), 0U) << named.source_address;
  EXPECT_FALSE(named.interface.empty());
  // An agent forks workers after this (cohort::spawn): a resolver thread
  // would not be there in the child.
  EXPECT_LE(thread_count(), before);
  const Route unknown = route_to_resolving_in_place("no-such-host.invalid");
  EXPECT_FALSE(unknown.found);
  EXPECT_NE(unknown.error.find("no-such-host.invalid"), std::string::npos) << unknown.error;
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

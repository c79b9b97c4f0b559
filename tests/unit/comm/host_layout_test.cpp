// The hier backend's view of a job: which host each rank is on, in what
// order hosts and ranks are numbered, and who leads each host.
#include <gtest/gtest.h>
#include <unistd.h>

#include "comm/backends/hier/layout.hpp"
#include "comm/kit/host_identity.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

TEST(HostLayout, HostsNumberedByTheirFirstRankAndRanksInOrder) {
  // Round-robin placement: hosts b and a interleave, a has one rank more.
  const hier_backend::HostLayout layout = hier_backend::lay_out({"b", "a", "b", "a", "b"});
  EXPECT_EQ(layout.nodes, 2);
  EXPECT_EQ(layout.node_of, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(layout.local_index, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(layout.local_size, (std::vector<int>{3, 2}));
}

TEST(HostLayout, OneHostAndNoHost) {
  EXPECT_EQ(hier_backend::lay_out({"a", "a", "a"}).nodes, 1);
  EXPECT_EQ(hier_backend::lay_out({}).nodes, 0);
}

TEST(HostIdentity, NamesTheHostTheBootAndTheNetworkNamespace) {
  const std::string identity = host_identity();
  EXPECT_EQ(identity, host_identity()) << "the same process, the same identity";
  // "host 0123456789abcdef 4026531840": 16 hex digits of the boot id, the
  // namespace's number as /proc/self/ns/net names it.
  const std::vector<std::string> fields = split_at(identity, ' ');
  ASSERT_EQ(fields.size(), 3u) << identity;
  EXPECT_EQ(fields[1].size(), 16u) << identity;
  EXPECT_EQ(fields[1].find_first_not_of("0123456789abcdef"), std::string::npos) << identity;
  char network[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/net", network, sizeof(network) - 1), 0);
  EXPECT_EQ(cat("net:[", fields[2], "]"), network) << identity;
  EXPECT_FALSE(host_name_of(identity).empty());
  EXPECT_EQ(host_name_of(identity).find(' '), std::string::npos);
}

// Two network namespaces of one machine (one boot id) and a second machine:
// the first machine's CPUs run four ranks, the second's one.
TEST(HostIdentity, RanksOnTheSameMachineShareItsKernel) {
  const std::vector<std::string> hosts{"n1 boot-a net:[1]", "n1 boot-a net:[1]",
                                       "n2 boot-a net:[2]", "n3 boot-b net:[3]",
                                       "n2 boot-a net:[2]"};
  EXPECT_EQ(ranks_on_same_machine(hosts, 0), 4);
  EXPECT_EQ(ranks_on_same_machine(hosts, 2), 4);
  EXPECT_EQ(ranks_on_same_machine(hosts, 3), 1);
  // An unknown boot id (no /proc/sys/kernel/random/boot_id) tells nothing.
  EXPECT_EQ(ranks_on_same_machine({"n1 ? net:[1]", "n2 ? net:[2]"}, 0), 1);
  EXPECT_EQ(ranks_on_same_machine({"host-a", "host-a"}, 0), 1);
}

}  // namespace
}  // namespace cohort::detail

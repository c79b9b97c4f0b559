// The hier backend's view of a job: which host each rank is on, in what
// order hosts and ranks are numbered, and who leads each host.
#include <gtest/gtest.h>

#include "comm/backends/hier/layout.hpp"
#include "comm/kit/host_identity.hpp"

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
  EXPECT_NE(identity.find(" net:["), std::string::npos) << identity;
  EXPECT_FALSE(host_name_of(identity).empty());
  EXPECT_EQ(host_name_of(identity).find(' '), std::string::npos);
}

}  // namespace
}  // namespace cohort::detail

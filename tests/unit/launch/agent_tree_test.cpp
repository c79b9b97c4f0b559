// The agents' tree (launch/agent_tree.hpp): who each relay's parent is, by
// the members' ids alone, whatever their order or which of them serves.
#include "launch/agent_tree.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

std::vector<TreeMember> members(int count, int server = -1) {
  std::vector<TreeMember> out;
  for (int id = count - 1; id >= 0; --id)  // in any order
    out.push_back({id, id == server ? "" : "r" + std::to_string(id)});
  return out;
}

using Path = std::vector<std::string>;

TEST(AgentTree, AJobOfAtMostWidthRelaysIsFlat) {
  const auto job = members(33, 0);  // 32 relays under the store
  for (int id = 0; id < 33; ++id)
    EXPECT_EQ(tree_path(id, job, 32), Path{}) << "agent " << id;
  EXPECT_FALSE(tree_has_inner_nodes(32, 32));
  EXPECT_TRUE(tree_has_inner_nodes(33, 32));
}

TEST(AgentTree, EachRelayHasAtMostWidthChildrenAndAPathToTheStore) {
  // Width 2, agent 0 serving: places 1..6 are agents 1..6.
  const auto job = members(7, 0);
  EXPECT_EQ(tree_path(1, job, 2), Path{});
  EXPECT_EQ(tree_path(2, job, 2), Path{});
  EXPECT_EQ(tree_path(3, job, 2), Path{"r1"});
  EXPECT_EQ(tree_path(4, job, 2), Path{"r1"});
  EXPECT_EQ(tree_path(5, job, 2), Path{"r2"});
  EXPECT_EQ(tree_path(6, job, 2), Path{"r2"});
  const auto deep = members(16, 0);
  EXPECT_EQ(tree_path(15, deep, 2), (Path{"r7", "r3", "r1"}));
}

TEST(AgentTree, WithTheStoreServedElsewhereEveryAgentHasAPlace) {
  // --hostfile: the launcher serves, agents 0..N-1 all relay.
  const auto job = members(5);
  EXPECT_EQ(tree_path(0, job, 2), Path{});
  EXPECT_EQ(tree_path(1, job, 2), Path{});
  EXPECT_EQ(tree_path(2, job, 2), Path{"r0"});
  EXPECT_EQ(tree_path(4, job, 2), Path{"r1"});
}

TEST(AgentTree, AMemberMissingFromTheRoundMovesTheOthersUpAndTheServerIsNoPlace) {
  // A lost agent 1 (elastic): the round's members alone make the tree.
  std::vector<TreeMember> round = members(7, 3);  // agent 3 serves
  round.erase(round.begin() + 5);                 // agent 1
  EXPECT_EQ(tree_path(0, round, 2), Path{});
  EXPECT_EQ(tree_path(2, round, 2), Path{});
  EXPECT_EQ(tree_path(4, round, 2), Path{"r0"});
  EXPECT_EQ(tree_path(6, round, 2), Path{"r2"});
  EXPECT_EQ(tree_path(3, round, 2), Path{}) << "the server has no relay";
  EXPECT_EQ(tree_path(9, round, 2), Path{}) << "not a member";
}

}  // namespace
}  // namespace cohort::detail

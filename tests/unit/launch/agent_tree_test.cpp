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

// Before the rendezvous, from node ranks alone: the parent tree_path()
// will name once every agent joined, for each place of the store and
// widths from 1 to 33 on jobs of up to 70 nodes.
TEST(AgentTree, TheParentAheadIsTheOneTheRendezvousWillName) {
  for (int width : {1, 2, 3, 32, 33}) {
    for (int nnodes : {1, 2, 5, 34, 70}) {
      for (int store : {-1, 0, nnodes / 2}) {
        const auto job = members(nnodes, store);
        for (int id = 0; id < nnodes; ++id) {
          const Path path = tree_path(id, job, width);
          const int parent = tree_parent_ahead(id, nnodes, store, width);
          SCOPED_TRACE("width " + std::to_string(width) + ", " + std::to_string(nnodes) +
                       " nodes, store at " + std::to_string(store) + ", agent " +
                       std::to_string(id));
          if (path.empty()) {
            EXPECT_EQ(parent, -1);
          } else {
            EXPECT_EQ("r" + std::to_string(parent), path.front());
          }
          // The place by node rank has the same places above it.
          const std::size_t place = tree_place_ahead(id, store);
          EXPECT_EQ(place == 0, id == store);
          if (place > 0) {
            EXPECT_EQ(tree_ancestors(place, width).size(), path.size());
          }
        }
      }
    }
  }
  EXPECT_EQ(tree_parent_ahead(3, 7, 0, 2), 1);
  EXPECT_EQ(tree_parent_ahead(2, 5, -1, 2), 0) << "the launcher serves: agent 0 has a place";
  EXPECT_EQ(tree_parent_ahead(0, 7, 0, 2), -1) << "the store's agent has no relay";
  EXPECT_EQ(tree_parent_ahead(7, 7, 0, 2), -1) << "not in the job";
}

}  // namespace
}  // namespace cohort::detail

// Elastic membership's pure pieces (src/launch/membership.hpp): who is in a
// round, and the table node 0 publishes; and the stop record that restarts
// the job to take a waiting node in.
#include "launch/membership.hpp"

#include <gtest/gtest.h>

#include "launch/node_group.hpp"

namespace cohort::detail {
namespace {

std::vector<int> ids_of(const std::vector<Member>& members) {
  std::vector<int> ids;
  for (const Member& member : members)
    ids.push_back(member.id);
  return ids;
}

TEST(Membership, TheSurvivorsComeFirstThenNewcomersInOrderOfArrivalUpToMax) {
  // Round before: 0, 1, 3. Node 1 was lost; 5 and 4 wait (5 came first).
  const std::vector<Member> registered{{5, "e5"}, {0, "e0"}, {4, "e4"}, {3, "e3"}};
  EXPECT_EQ(ids_of(choose_members(registered, {0, 1, 3}, 4)), (std::vector<int>{0, 3, 4, 5}));
  // Room for one newcomer: the first to arrive.
  EXPECT_EQ(ids_of(choose_members(registered, {0, 1, 3}, 3)), (std::vector<int>{0, 3, 5}));
  // No room: the survivors keep their places even when newcomers came first.
  EXPECT_EQ(ids_of(choose_members(registered, {0, 1, 3}, 2)), (std::vector<int>{0, 3}));
  // The first round: in order of arrival, sorted by id (node 0 first).
  EXPECT_EQ(ids_of(choose_members(registered, {}, 3)), (std::vector<int>{0, 4, 5}));
  // An agent registered twice counts once.
  EXPECT_EQ(ids_of(choose_members({{2, "a"}, {2, "b"}, {0, "c"}}, {}, 4)),
            (std::vector<int>{0, 2}));
}

TEST(Membership, TheRoundTableRoundTripsAndRefusesGarbage) {
  RoundTable table;
  table.restarts = 2;
  table.master_port = 29511;
  table.run_id = "job\t7";
  table.members = {{0, "2\tn1\t100\tnode 0"}, {3, "2\tn4\t300\tnode 3"}};
  const auto back = RoundTable::decode(table.encode());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->restarts, 2);
  EXPECT_EQ(back->master_port, 29511);
  EXPECT_EQ(back->run_id, "job 7");
  ASSERT_EQ(back->members.size(), 2u);
  EXPECT_EQ(back->members[1].entry, "2\tn4\t300\tnode 3");
  EXPECT_EQ(back->node_rank_of(3), 1);
  EXPECT_EQ(back->node_rank_of(1), -1);
  EXPECT_FALSE(back->traced);
  table.traced = true;  // whoever serves the store writes the job's timeline
  const auto traced = RoundTable::decode(table.encode());
  ASSERT_TRUE(traced);
  EXPECT_TRUE(traced->traced);
  EXPECT_EQ(traced->run_id, "job 7");
  EXPECT_EQ(traced->members.size(), 2u);
  for (const char* bad :
       {"", "0\t1", "x\t1\tid", "0\t70000\tid", "0\t1\tid\n1", "0\t1\tid\nx\te",
        "0\t1\tid\n1\ta\n1\tb", "-1\t1\tid", "0\t1\tid\tyes", "0\t1\tid\ttraced\t"}) {
    EXPECT_FALSE(RoundTable::decode(bad)) << bad;
  }
}

TEST(Membership, AStopToTakeANodeInIsNeitherAFailureNorALoss) {
  StopRecord record;
  record.host = "n4";
  record.membership = true;
  record.summary = "a node on n4 is waiting to join";
  const auto back = StopRecord::decode(record.encode());
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->membership);
  EXPECT_FALSE(back->node_lost);
  EXPECT_EQ(back->rank, -1);
}

}  // namespace
}  // namespace cohort::detail

// How a node is found lost (heartbeats.hpp), on a clock moved by hand: the
// decisions of the heartbeat thread without its thread, store or sleeps.
#include "launch/heartbeats.hpp"

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;
using TimePoint = HeartbeatWatch::TimePoint;

TEST(HeartbeatWatch, ANodeWhoseCounterMovesIsNeverLost) {
  HeartbeatWatch watch(10s);
  TimePoint now{};
  watch.begin(2, now, true);
  for (std::int64_t count = 0; count < 100; ++count) {
    now += 1s;
    EXPECT_FALSE(watch.stalled(1, count, now)) << count;
  }
}

TEST(HeartbeatWatch, ACounterStillForTheTimeoutIsLostAndNotBefore) {
  HeartbeatWatch watch(10s);
  TimePoint now{};
  watch.begin(3, now, true);
  EXPECT_FALSE(watch.stalled(2, 7, now));
  EXPECT_FALSE(watch.stalled(2, 7, now + 9999ms));
  EXPECT_TRUE(watch.stalled(2, 7, now + 10s));
  // It moves again: watched afresh from then.
  EXPECT_FALSE(watch.stalled(2, 8, now + 11s));
  EXPECT_FALSE(watch.stalled(2, 8, now + 20s));
  EXPECT_TRUE(watch.stalled(2, 8, now + 21s));
}

TEST(HeartbeatWatch, ANodeNotArrivedIsAwaitedNotLostAndANewAttemptStartsAfresh) {
  HeartbeatWatch watch(10s);
  TimePoint now{};
  watch.begin(2, now, false);  // the --hostfile launcher: agents still connecting over ssh
  EXPECT_FALSE(watch.arrived(1));
  EXPECT_FALSE(watch.stalled(1, 0, now + 1h));
  watch.arrive(1, now + 1h);
  EXPECT_FALSE(watch.stalled(1, 0, now + 1h + 1s));
  EXPECT_TRUE(watch.stalled(1, 0, now + 1h + 11s));
  // A restart: the nodes were busy stopping and starting, not lost.
  watch.begin(2, now + 2h, true);
  EXPECT_FALSE(watch.stalled(1, 0, now + 2h + 9s));
}

// The held-out intermittent failure of a restart across nodes: node 1's
// heartbeat thread saw attempt 0's stop just after its main thread used
// the last restart (--max-restarts 1) and moved to attempt 1. Had it ended
// there, node 0 would have taken node 1 for lost 10 s into attempt 2.
TEST(HeartbeatWatch, ARestartThatUsedTheLastOfTheBudgetKeepsTheBeatsGoing) {
  EXPECT_FALSE(heartbeats_end(false, false, /*attempt_now=*/1, /*attempt_stopped=*/0));
  // The same stop, no restart under way and none left: beating is over.
  EXPECT_TRUE(heartbeats_end(false, false, 0, 0));
  // Restarts left: the job may restart, keep beating.
  EXPECT_FALSE(heartbeats_end(false, true, 0, 0));
  // Whoever serves the store watches to the end.
  EXPECT_FALSE(heartbeats_end(true, false, 0, 0));
}

}  // namespace
}  // namespace cohort::detail

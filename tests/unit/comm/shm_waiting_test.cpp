// How a rank of the shm backend waits (waiting.hpp): the yields between
// its spins and its futex sleep, and what a slow yield teaches it.
#include <gtest/gtest.h>

#include "comm/backends/shm/waiting.hpp"

namespace cohort::detail::shm_backend {
namespace {

using std::chrono::nanoseconds;

TEST(ShmWaiting, AYieldThatFindsTheCounterThereEndsTheWait) {
  Counter counter;
  counter.value = 5;
  WaitPolicy policy;
  policy.yields = 4;
  WaitState state;
  EXPECT_TRUE(yield_until(counter, 5, policy, state));
  EXPECT_TRUE(yield_until(counter, 4, policy, state));  // passed it
  EXPECT_EQ(state.skip_yields.load(), 0);
}

TEST(ShmWaiting, ASlowYieldSendsTheNextWaitsStraightToTheFutex) {
  Counter counter;  // never advanced: no yield finds it there
  WaitPolicy policy;
  policy.yields = 8;
  policy.slow_yield = nanoseconds(1);  // every yield is as slow as that
  policy.waits_without_yields = 3;
  WaitState state;
  EXPECT_FALSE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 3);  // after the first yield, not the eighth
  for (int wait = 0; wait < 3; ++wait)
    EXPECT_FALSE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 0);  // the next wait yields again, and learns anew
  EXPECT_FALSE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 3);
}

TEST(ShmWaiting, WithoutALimitEveryWaitYields) {
  Counter counter;
  WaitPolicy policy;
  policy.yields = 8;
  policy.slow_yield = nanoseconds(0);  // COHORT_SHM_SLOW_YIELD_US=0
  WaitState state;
  for (int wait = 0; wait < 3; ++wait)
    EXPECT_FALSE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 0);
}

}  // namespace
}  // namespace cohort::detail::shm_backend

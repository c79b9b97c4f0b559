// How a rank of the shm backend waits (waiting.hpp): the yields between
// its spins and its futex sleep, what a slow yield teaches it, and how it
// leaves a CPU it shares with the rank it waits for.
#include <chrono>
#include <optional>
#include <vector>

#include <gtest/gtest.h>
#include <sched.h>

#include "comm/backends/shm/waiting.hpp"

namespace cohort::detail::shm_backend {
namespace {

using std::chrono::nanoseconds;

TEST(ShmWaiting, AYieldThatFindsTheCounterThereEndsTheWait) {
  Counter counter;
  counter.value = 5;
  WaitPolicy policy;
  policy.yields = 4;
  // On a loaded machine a yield can take a whole time slice (1 ms by
  // default), which rightly teaches the wait to skip yields: not what this
  // test is about, so no yield here is ever that slow.
  policy.time_slice = std::chrono::hours(1);
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

// A yield shorter than a time slice that found the counter there was a
// peer's step on this core: it teaches nothing.
TEST(ShmWaiting, AYieldThatFindsTheCounterThereWithinATimeSliceTeachesNothing) {
  Counter counter;
  counter.value = 1;
  WaitPolicy policy;
  policy.yields = 8;
  policy.slow_yield = nanoseconds(1);
  policy.time_slice = std::chrono::hours(1);
  WaitState state;
  EXPECT_TRUE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 0);
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

TEST(ShmWaiting, TheTasksRunnableNowAreLoadavgsFourthFieldBeforeItsSlash) {
  EXPECT_EQ(runnable_in_loadavg("0.31 1.27 2.06 2/108 30844\n"), 2);
  EXPECT_EQ(runnable_in_loadavg("12.00 9.50 3.10 17/1302 1"), 17);
  for (const char* text :
       {"", "0.31 1.27 2.06", "0.31 1.27 2.06 ", "0.31 1.27 2.06 2", "0.31 1.27 2.06 x/108",
        "0.31 1.27 2.06 -1/108", "0.31 1.27 2.06 99999999999/108"})
    EXPECT_EQ(runnable_in_loadavg(text), std::nullopt) << text;
  // This thread is running as it reads.
  EXPECT_TRUE(more_runnable_than(0));
}

// With more ranks than cores a peer's long step on this CPU makes a yield
// slow as well: a rank told how many tasks its job runs here learns from a
// slow yield only while the kernel runs more than that.
TEST(ShmWaiting, ASlowYieldTeachesOnlyWhileTheMachineRunsMoreThanTheJob) {
  Counter counter;
  WaitPolicy policy;
  policy.yields = 8;
  policy.slow_yield = nanoseconds(1);  // every yield is as slow as that
  policy.waits_without_yields = 3;
  policy.own_ranks = 1 << 30;  // no machine runs more
  WaitState state;
  EXPECT_FALSE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 0);
  policy.own_ranks = -1;  // any running task is one more: this thread is
  EXPECT_FALSE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 3);
}

// A rank that keeps yielding looks for a lost peer or its deadline after
// each round of yields, and never sleeps: here the counter comes at the
// third look, and a sleep would have lasted the whole tick.
TEST(ShmWaiting, AWaitThatKeepsYieldingLooksAroundBetweenRoundsAndNeverSleeps) {
  Counter counter;
  WaitPolicy policy;
  policy.spins = 4;
  policy.yields = 8;
  policy.slow_yield = nanoseconds(0);
  policy.keep_yielding = true;
  policy.tick = std::chrono::seconds(30);
  WaitState state;
  int looks = 0;
  const auto started = std::chrono::steady_clock::now();
  wait_until(counter, 1, policy, state, [&] {
    if (++looks == 3) counter.value.store(1);
  });
  EXPECT_EQ(looks, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - started, policy.tick) << "it slept";
}

// Two ranks the scheduler put on one core: the one that waits does not spin
// (its peer cannot run meanwhile), wherever else it waits it does.
TEST(ShmWaiting, NoSpinsOnTheCpuTheCounterWasLastAdvancedFrom) {
  cpu_set_t one;
  CPU_ZERO(&one);
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  const int cpu = sched_getcpu();
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // so that it stays put
  Counter counter;
  WaitPolicy policy;
  policy.spins = 4096;
  const WaitState state;
  EXPECT_EQ(spins_for(counter, policy, state, cpu), 4096);  // never advanced
  advance(counter, 1);
  EXPECT_EQ(counter.advanced_on.load(), cpu + 1);
  EXPECT_EQ(spins_for(counter, policy, state, cpu), 0);
  EXPECT_EQ(spins_for(counter, policy, state, cpu + 1), 4096);
  sched_setaffinity(0, sizeof(before), &before);
}

// A yield that took a time slice, though the counter was there when it
// came back (as it mostly is by then): the next waits skip yielding all the
// same, and poll the busy count before they sleep.
TEST(ShmWaiting, ASlowYieldThatFindsTheCounterThereStillTeaches) {
  Counter counter;
  counter.value = 1;
  WaitPolicy policy;
  policy.spins = 64;
  policy.yields = 8;
  policy.slow_yield = nanoseconds(1);  // every yield is as slow as that
  policy.time_slice = nanoseconds(1);  // and took a time slice
  policy.waits_without_yields = 3;
  policy.busy_spins = 4096;
  WaitState state;
  EXPECT_TRUE(yield_until(counter, 1, policy, state));
  EXPECT_EQ(state.skip_yields.load(), 3);
  const int cpu = sched_getcpu();
  EXPECT_EQ(spins_for(counter, policy, state, cpu + 1), 4096);
  for (int wait = 0; wait < 3; ++wait)
    EXPECT_FALSE(yield_until(counter, 2, policy, state));
  EXPECT_EQ(spins_for(counter, policy, state, cpu + 1), 64) << "the machine is quiet again";
}

// The CPUs this process may use, and this thread put on the first of them
// with its affinity as it was (so that only a move takes it elsewhere):
// one CPU when there is only one, none when the affinity could not be read
// or set.
std::vector<int> on_first_cpu(cpu_set_t& allowed) {
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  if (cpus.size() < 2) return cpus;
  cpu_set_t first;
  CPU_ZERO(&first);
  CPU_SET(cpus[0], &first);
  if (sched_setaffinity(0, sizeof(first), &first) != 0 || sched_getcpu() != cpus[0] ||
      sched_setaffinity(0, sizeof(allowed), &allowed) != 0)
    cpus.clear();
  return cpus;
}

// Two ranks on one CPU: each has its own of the CPUs it may use (its slot,
// counted round); the one not on its own moves there, the other stays, and
// neither is bound afterwards.
TEST(ShmWaiting, ARankOnItsPeersCpuMovesToItsOwnAndStaysFree) {
  cpu_set_t before;
  const std::vector<int> cpus = on_first_cpu(before);
  if (cpus.size() == 1) GTEST_SKIP() << "needs 2 CPUs to move between; this process may use 1";
  ASSERT_GE(cpus.size(), 2U) << "could not read this thread's affinity or put it on a CPU";
  EXPECT_FALSE(move_to_own_cpu(cpus[0], 0)) << "slot 0 is the first CPU: stays";
  EXPECT_FALSE(move_to_own_cpu(cpus[0], static_cast<int>(cpus.size()))) << "counted round";
  EXPECT_FALSE(move_to_own_cpu(cpus[0], -1)) << "no slot: never moves";
  EXPECT_TRUE(move_to_own_cpu(cpus[0], 1));
  EXPECT_EQ(sched_getcpu(), cpus[1]);
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &before)) << "the affinity it had, not the one CPU";
}

TEST(ShmWaiting, WithMoreRanksThanCoresAWaitMovesTheRankToItsSlotsCpu) {
  cpu_set_t allowed;
  const std::vector<int> cpus = on_first_cpu(allowed);
  if (cpus.size() == 1) GTEST_SKIP() << "needs 2 CPUs to move between; this process may use 1";
  ASSERT_GE(cpus.size(), 2U) << "could not read this thread's affinity or put it on a CPU";
  Counter counter;  // there already: only the move before the spins is tested
  counter.value = 1;
  WaitPolicy policy;
  policy.own_cpu_slot = 1;
  WaitState state;
  wait_until(counter, 1, policy, state, [] {});
  // Its CPU could change by the scheduler's hand: that no move was tried
  // shows in the count of waits that looked at moving.
  EXPECT_EQ(state.on_shared_cpu.load(), 0) << "not spread, the counter's owner elsewhere: no move";
  policy.spread = true;
  wait_until(counter, 1, policy, state, [] {});
  EXPECT_EQ(sched_getcpu(), cpus[1]) << "spread: moved to slot 1's CPU";
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &allowed)) << "the affinity it had, not the one CPU";
}

}  // namespace
}  // namespace cohort::detail::shm_backend

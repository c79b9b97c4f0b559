// The agent's lifecycle policy (lifecycle.hpp) driven by events alone: no
// process, clock, store or sleep. Each scenario the cluster tests cover
// end to end, decided here in microseconds.
#include "launch/lifecycle.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

namespace cohort::detail {
namespace {

using Action = LifecycleAction;

int exited(int code) {
  return code << 8;  // a wait status, as waitpid gives it
}
int killed_by(int signal) {
  return signal;
}

Lifecycle::Facts facts(bool multi_node, int max_restarts = 0) {
  Lifecycle::Facts out;
  out.node_rank = 1;
  out.host = "n2";
  out.multi_node = multi_node;
  out.timeout = std::chrono::seconds(3);
  out.budget.max_restarts = max_restarts;
  return out;
}

StopRecord record(int node, int rank, int code, const std::string& summary) {
  StopRecord out;
  out.node = node;
  out.host = node == 1 ? "n2" : "n1";
  out.rank = rank;
  out.exit_code = code;
  out.summary = summary;
  return out;
}

TEST(Lifecycle, TheFirstFailureStopsEveryWorkerAndTellsTheOtherNodes) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  EXPECT_TRUE(life.worker_exited(0, 4, exited(0)).empty()) << "a success changes nothing";
  const StopRecord mine = record(1, 5, 3, "rank 5 failed: exited with code 3");
  EXPECT_EQ(life.worker_exited(1, 5, exited(3)),
            (LifecycleActions{Action::stop(SIGTERM), Action::tell(mine)}));
  // The workers stopped by it fail too: the first failure stays the one.
  EXPECT_TRUE(life.worker_exited(0, 4, killed_by(SIGTERM)).empty());
  EXPECT_EQ(life.cause(), StopCause::worker_failed);
  EXPECT_EQ(life.first_failure(), 1);
  life.declared(mine, mine);
  EXPECT_TRUE(life.own_stop());
  EXPECT_EQ(life.exit_code(exited(3)), 3);
}

TEST(Lifecycle, AKilledWorkersStatusIsTheShells) {
  Lifecycle life(facts(false));
  life.begin_attempt(0);
  EXPECT_EQ(life.worker_exited(2, 2, killed_by(SIGKILL)), LifecycleActions{Action::stop(SIGTERM)});
  EXPECT_EQ(life.own_record()->summary, "rank 2 failed: killed by SIGKILL (signal 9)");
  EXPECT_EQ(life.exit_code(killed_by(SIGKILL)), 137);
}

TEST(Lifecycle, OtherSignalsArePassedOnAndTheJobGoesOn) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  EXPECT_EQ(life.signal(SIGUSR1), LifecycleActions{Action::forward(SIGUSR1)});
  EXPECT_EQ(life.signal(SIGUSR2), LifecycleActions{Action::forward(SIGUSR2)});
  EXPECT_EQ(life.cause(), StopCause::none);
  EXPECT_EQ(life.exit_code(0), 0);
}

TEST(Lifecycle, AStopSignalStopsTheJobAndASecondTakesTheGraceAway) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  EXPECT_EQ(life.signal(SIGTERM),
            (LifecycleActions{Action::stop(SIGTERM),
                              Action::tell(record(1, -1, 143,
                                                  "cohort run on n2 was stopped by "
                                                  "SIGTERM"))}));
  // Asked again: the same stop, which the process set makes SIGKILL; the
  // other nodes were told once.
  EXPECT_EQ(life.signal(SIGINT), LifecycleActions{Action::stop(SIGINT)});
  EXPECT_EQ(life.stop_signal(), SIGTERM);
  EXPECT_EQ(life.exit_code(0), 143);
}

TEST(Lifecycle, TheTimeLimitNotesWhoRunsStopsAndExits124) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  EXPECT_EQ(life.timed_out(),
            (LifecycleActions{Action::note_running(), Action::stop(SIGTERM),
                              Action::tell(record(1, -1, 124, "the job ran past --timeout 3 s"))}));
  EXPECT_TRUE(life.worker_exited(0, 4, killed_by(SIGTERM)).empty());
  EXPECT_TRUE(life.timed_out().empty());
  EXPECT_EQ(life.exit_code(killed_by(SIGTERM)), kTimeoutExitCode);
}

TEST(Lifecycle, TheLauncherGoneStopsLikeAHangup) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  const LifecycleActions actions = life.launcher_gone();
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0], Action::stop(SIGTERM));
  EXPECT_EQ(actions[1].record.summary, "the connection to the launcher of the agent on n2 closed");
  EXPECT_EQ(life.exit_code(0), 129);
}

TEST(Lifecycle, AClientThatCanNeverRendezvousEndsTheJobWithItsReason) {
  Lifecycle life(facts(false));
  life.begin_attempt(0);
  EXPECT_EQ(life.unservable("query type 99"), LifecycleActions{Action::stop(SIGTERM)});
  EXPECT_EQ(life.cause(), StopCause::unservable);
  EXPECT_EQ(life.unservable_why(), "query type 99");
  EXPECT_EQ(life.exit_code(0), 1);
}

TEST(Lifecycle, AStopElsewhereStopsTheWorkersHereWithItsExitStatus) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  const StopRecord theirs = record(0, 0, 7, "rank 0 failed: exited with code 7");
  EXPECT_EQ(life.stopped_elsewhere(theirs), LifecycleActions{Action::stop(SIGTERM)});
  // Its own workers, stopped by it, are no failure of this node's.
  EXPECT_TRUE(life.worker_exited(0, 4, killed_by(SIGTERM)).empty());
  EXPECT_FALSE(life.own_stop());
  EXPECT_EQ(life.exit_code(killed_by(SIGTERM)), 7);
}

TEST(Lifecycle, WhenTwoNodesStopAtOnceTheStoresFirstRecordWins) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  const LifecycleActions actions = life.worker_exited(0, 4, exited(1));
  const StopRecord theirs = record(0, 1, 2, "rank 1 failed: exited with code 2");
  life.declared(theirs, actions.back().record);
  EXPECT_FALSE(life.own_stop());
  EXPECT_EQ(life.exit_code(exited(1)), 2);
}

TEST(Lifecycle, OneNodeRestartsAfterAFailureWhileTheBudgetLasts) {
  Lifecycle life(facts(false, 2));
  for (int attempt = 0; attempt < 3; ++attempt) {
    life.begin_attempt(0);
    EXPECT_EQ(life.worker_exited(0, 0, exited(1)), LifecycleActions{Action::stop(SIGTERM)})
        << "one node tells nobody";
    EXPECT_EQ(life.restarts_alone(attempt), attempt < 2) << "attempt " << attempt;
  }
  // Neither a signal nor the time limit restarts.
  life.begin_attempt(0);
  (void)life.signal(SIGTERM);
  EXPECT_FALSE(life.restarts_alone(0));
  life.begin_attempt(0);
  (void)life.timed_out();
  EXPECT_FALSE(life.restarts_alone(0));
  life.begin_attempt(0);
  EXPECT_FALSE(life.restarts_alone(0)) << "every worker succeeded";
}

TEST(Lifecycle, ANewAttemptForgetsTheLastOnesStop) {
  Lifecycle life(facts(true, 1));
  life.begin_attempt(1);
  const StopRecord mine = life.worker_exited(0, 4, exited(1)).back().record;
  life.declared(mine, mine);
  life.begin_attempt(0);  // elastic: this node is 0 now
  EXPECT_EQ(life.cause(), StopCause::none);
  EXPECT_FALSE(life.first_stop());
  EXPECT_FALSE(life.own_stop());
  EXPECT_EQ(life.worker_exited(1, 1, exited(5)).back().record.node, 0);
}

TEST(Lifecycle, ALostNodeOutranksTheFailureItCaused) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  const StopRecord mine = life.worker_exited(0, 4, exited(1)).back().record;
  life.declared(mine, mine);
  StopRecord lost = record(2, -1, 1, "node 2 (n3) stopped answering");
  lost.node_lost = true;
  life.settled(lost);
  EXPECT_FALSE(life.own_stop());
  EXPECT_EQ(life.first_stop()->summary, "node 2 (n3) stopped answering");
  life.settled(lost);
  EXPECT_FALSE(life.own_stop());
}

TEST(Lifecycle, AProgramThatCannotRunHereStopsEveryNode) {
  Lifecycle life(facts(true));
  life.begin_attempt(1);
  const LifecycleActions actions = life.program_unrunnable(127, "cohort run: ./train: not found");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, Action::Kind::tell_other_nodes);
  EXPECT_EQ(actions[0].record.exit_code, 127);
  life.declared(actions[0].record, actions[0].record);
  EXPECT_EQ(life.exit_code(0), 127);
}

TEST(Lifecycle, AStopSignalBetweenAttemptsIsToldEvenAfterAFailure) {
  Lifecycle life(facts(true, 1));
  life.begin_attempt(1);
  (void)life.worker_exited(0, 4, exited(1));
  const LifecycleActions actions = life.stopped_between_attempts(SIGINT);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].record.exit_code, 130);
  EXPECT_EQ(actions[0].record.summary, "cohort run on n2 was stopped by SIGINT");
}

// The job-wide budget, as every node and the --hostfile launcher decide it.
TEST(RestartBudget, TheBudgetIsTheJobsAndOnlyFailuresUseIt) {
  const RestartBudget budget{2, false, 0};
  const StopRecord failed = record(1, 5, 3, "rank 5 failed");
  EXPECT_TRUE(budget.restartable(failed, 0, 4));
  EXPECT_TRUE(budget.restartable(failed, 1, 4));
  EXPECT_FALSE(budget.restartable(failed, 2, 4)) << "two restarts used, on any nodes";
  EXPECT_TRUE(budget.may_restart(1));
  EXPECT_FALSE(budget.may_restart(2));
  const StopRecord signal = record(1, -1, 143, "stopped by SIGTERM");
  EXPECT_FALSE(budget.restartable(signal, 0, 4));
  StopRecord lost = record(2, -1, 1, "node 2 lost");
  lost.node_lost = true;
  EXPECT_FALSE(budget.restartable(lost, 0, 4)) << "without elastic membership a lost node ends it";
}

TEST(RestartBudget, ElasticJobsGoOnWithoutALostNodeAndTakeInALateOne) {
  const RestartBudget budget{0, true, 2};
  StopRecord lost = record(2, -1, 1, "node 2 lost");
  lost.node_lost = true;
  EXPECT_TRUE(budget.restartable(lost, 0, 3)) << "2 remain of 3";
  EXPECT_FALSE(budget.restartable(lost, 0, 2)) << "1 would remain, below MIN 2";
  StopRecord late;
  late.membership = true;
  EXPECT_TRUE(budget.restartable(late, 5, 2)) << "taking a node in uses no budget";
  EXPECT_TRUE(budget.may_restart(100));
  EXPECT_FALSE(budget.restartable(record(1, 5, 3, "rank 5 failed"), 0, 3)) << "no budget left";
}

}  // namespace
}  // namespace cohort::detail

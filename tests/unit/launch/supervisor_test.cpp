// The supervisor's parts with their seams faked: the event loop on a clock
// moved by hand, and a process set whose processes are a table. A worker
// that never exits, one that ends in time, a second stop request, a spawn
// that fails half-way, and the order that keeps a group's pid its own.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "launch/event_loop.hpp"
#include "launch/process_set.hpp"

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;

class FakeClock : public LoopClock {
 public:
  TimePoint now() const override { return now_; }
  void advance(std::chrono::milliseconds by) { now_ += by; }

 private:
  TimePoint now_{};
};

// Processes as a table: a SIGKILL ends one at once; others end when the
// test says so. Every call is logged in order.
class FakeProcesses : public ProcessControl {
 public:
  void signal_group(pid_t pgid, int signal) override {
    log.push_back("signal " + std::to_string(pgid) + " " + std::to_string(signal));
    if (signal == SIGKILL && !table[pgid].ended) end(pgid, SIGKILL);  // a status "killed by 9"
  }
  bool ended(pid_t pid) override { return table[pid].ended && !table[pid].reaped; }
  int reap(pid_t pid) override {
    log.push_back("reap " + std::to_string(pid));
    Entry& entry = table[pid];
    EXPECT_TRUE(entry.ended) << "reaped " << pid << ", which still runs: reap would block";
    EXPECT_FALSE(entry.reaped) << "reaped " << pid << " twice";
    entry.reaped = true;
    return entry.status;
  }
  void end(pid_t pid, int status) {
    table[pid].ended = true;
    table[pid].status = status;
  }
  bool got(pid_t pid, int signal) const {
    const std::string wanted = "signal " + std::to_string(pid) + " " + std::to_string(signal);
    return std::find(log.begin(), log.end(), wanted) != log.end();
  }

  struct Entry {
    bool ended = false;
    bool reaped = false;
    int status = 0;
  };
  std::map<pid_t, Entry> table;
  std::vector<std::string> log;
};

sigset_t no_signals() {
  sigset_t set;
  sigemptyset(&set);
  return set;
}

class ProcessSetTest : public ::testing::Test {
 protected:
  void reap() {
    set_.reap([this](std::size_t i) { log_.push_back("before " + std::to_string(set_[i].pid)); },
              [this](std::size_t i) { log_.push_back("ended " + std::to_string(set_[i].pid)); });
  }
  FakeClock clock_;
  FakeProcesses processes_;
  EventLoop loop_{no_signals(), clock_};
  ProcessSet set_{loop_, processes_, 0};
  std::vector<std::string> log_;
};

TEST_F(ProcessSetTest, AWorkerThatNeverExitsIsKilledWhenTheGraceHasPassed) {
  set_.add(101);
  set_.add(102);
  processes_.end(102, 0);
  reap();
  set_.stop(SIGTERM, 5000ms);
  EXPECT_TRUE(processes_.got(101, SIGTERM));
  EXPECT_FALSE(processes_.got(102, SIGTERM));  // it had ended
  clock_.advance(4999ms);
  loop_.turn(0ms);
  EXPECT_FALSE(processes_.got(101, SIGKILL)) << "killed before the grace passed";
  clock_.advance(1ms);
  loop_.turn(0ms);
  EXPECT_TRUE(processes_.got(101, SIGKILL));
  reap();
  EXPECT_FALSE(set_.any_running());
  EXPECT_TRUE(set_[0].signalled);
  EXPECT_TRUE(WIFSIGNALED(set_[0].wait_status) && WTERMSIG(set_[0].wait_status) == SIGKILL);
  EXPECT_FALSE(set_[1].signalled);
}

TEST_F(ProcessSetTest, WorkersThatEndInTimeAreNotKilled) {
  set_.add(101);
  set_.stop(SIGTERM, 5000ms);
  processes_.end(101, 15);  // killed by its SIGTERM
  reap();                   // (its group's leftovers get SIGKILL, as ever)
  EXPECT_FALSE(loop_.has_deadline(0));
  const std::size_t calls = processes_.log.size();
  clock_.advance(60000ms);
  loop_.turn(0ms);
  EXPECT_EQ(processes_.log.size(), calls) << "signalled after it was reaped";
}

TEST_F(ProcessSetTest, AskedToStopTwiceThereIsNoMoreGrace) {
  set_.add(101);
  set_.stop(SIGTERM, 5000ms);
  EXPECT_FALSE(processes_.got(101, SIGKILL));
  set_.stop(SIGINT, 5000ms);
  EXPECT_TRUE(processes_.got(101, SIGKILL));
}

// The group is killed and the supervisor told while the pid, not yet
// reaped, still names that group; only then is it reaped.
TEST_F(ProcessSetTest, AnEndedWorkersGroupIsKilledBeforeItIsReaped) {
  set_.add(101);
  processes_.end(101, 0);
  reap();
  const std::vector<std::string> calls{processes_.log.begin(), processes_.log.end()};
  EXPECT_EQ(calls, (std::vector<std::string>{"signal 101 9", "reap 101"}));
  EXPECT_EQ(log_, (std::vector<std::string>{"before 101", "ended 101"}));
}

// Starting fails at the third worker (out of descriptors, say): the two
// started are SIGKILLed and reaped when the supervisor unwinds.
TEST(ProcessSet, ASpawnThatFailsHalfWayLeavesNoWorker) {
  FakeClock clock;
  FakeProcesses processes;
  EventLoop loop(no_signals(), clock);
  EXPECT_THROW(
      {
        ProcessSet set(loop, processes, 0);
        for (pid_t pid : {201, 202, 203}) {
          if (pid == 203) throw std::runtime_error("pipe2 failed: Too many open files");
          set.add(pid);
        }
      },
      std::runtime_error);
  for (pid_t pid : {201, 202}) {
    EXPECT_TRUE(processes.got(pid, SIGKILL)) << pid;
    EXPECT_TRUE(processes.table[pid].reaped) << pid;
  }
}

TEST(EventLoop, DeadlinesFireInTheirOrderOnTheClock) {
  FakeClock clock;
  EventLoop loop(no_signals(), clock);
  std::vector<int> fired;
  loop.set_deadline(1, 300ms, [&] { fired.push_back(1); });
  loop.set_deadline(2, 100ms, [&] { fired.push_back(2); });
  loop.set_deadline(3, 200ms, [&] { fired.push_back(3); });
  loop.set_deadline(3, 250ms, [&] { fired.push_back(33); });  // replaces 3
  loop.cancel_deadline(1);
  clock.advance(150ms);
  loop.turn(0ms);
  EXPECT_EQ(fired, (std::vector<int>{2}));
  clock.advance(1000ms);
  loop.turn(0ms);
  EXPECT_EQ(fired, (std::vector<int>{2, 33}));
}

TEST(EventLoop, AReadableDescriptorCallsBackAndMayUnwatchItself) {
  EventLoop loop(no_signals());
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  Fd read_end(ends[0]);
  Fd write_end(ends[1]);
  int calls = 0;
  loop.watch(read_end.get(), [&] {
    char byte = 0;
    (void)!::read(read_end.get(), &byte, 1);
    ++calls;
    loop.unwatch(read_end.get());
  });
  ASSERT_EQ(::write(write_end.get(), "ab", 2), 2);
  loop.turn(1000ms);
  loop.turn(0ms);  // one byte left, but no longer watched
  EXPECT_EQ(calls, 1);
}

TEST(EventLoop, ItsSignalsArriveThroughTheLoopAndTheMaskIsRestored) {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  {
    EventLoop loop(usr1);
    int received = 0;
    loop.on_signal([&](int signal) { received = signal; });
    kill(getpid(), SIGUSR1);  // blocked: pending until the loop reads it
    loop.turn(1000ms);
    EXPECT_EQ(received, SIGUSR1);
  }
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  EXPECT_EQ(sigismember(&now, SIGUSR1), 0);
}

}  // namespace
}  // namespace cohort::detail

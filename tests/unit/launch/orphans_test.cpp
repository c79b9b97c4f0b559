// What workers leave behind, with real processes: a subreaper finds the
// orphans handed to it, whichever of its threads the kernel gave them to,
// passes over the children it knows, and stops the others.
#include "launch/orphans.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/files.hpp"

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Runs `script` in sh, a child of this thread, and waits for it to exit.
void run_and_wait(const std::string& script) {
  const pid_t shell = fork();
  if (shell == 0) {
    execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(shell, &status, 0);
}

// The pid a script wrote to `path`, once it is there (0 after 10 s).
pid_t pid_in(const fs::path& path) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(2ms)) {
    const std::string text = test::read_file(path);
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
  }
  return 0;
}

// Waits (10 s at most) until `pid` runs `command`: the shell's `&` forks
// first and execs after, so the pid it prints may still be a shell's.
void wait_until_it_runs(pid_t pid, const std::string& command) {
  const fs::path comm = "/proc/" + std::to_string(pid) + "/comm";
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(2ms)) {
    if (test::read_file(comm) == command + "\n") return;
  }
}

bool listed(const std::vector<Orphan>& orphans, pid_t pid) {
  return std::any_of(orphans.begin(), orphans.end(),
                     [&](const Orphan& orphan) { return orphan.pid == pid; });
}

class Orphans : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(adopt_orphans()); }
  void TearDown() override { prctl(PR_SET_CHILD_SUBREAPER, 0); }
  test::TempDir dir_;
};

TEST_F(Orphans, TheSubreaperFindsWhatItWasHandedFromAnyThreadAndStopsIt) {
  // A shell that leaves a sleep behind and exits: the sleep is handed over.
  const fs::path first = dir_.path() / "first";
  run_and_wait("sleep 30 & echo $! > " + first.string());
  // The same from another thread: the orphan may land on any thread's list.
  const fs::path second = dir_.path() / "second";
  std::thread([&] { run_and_wait("sleep 30 & echo $! > " + second.string()); }).join();
  // A child of this process that it knows (a worker, a helper).
  const pid_t known = fork();
  if (known == 0) {
    execl("/bin/sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  const pid_t orphan = pid_in(first), other = pid_in(second);
  ASSERT_GT(orphan, 0);
  ASSERT_GT(other, 0);
  wait_until_it_runs(orphan, "sleep");

  const std::vector<Orphan> found = adopted_orphans({known});
  EXPECT_TRUE(listed(found, orphan)) << orphan;
  EXPECT_TRUE(listed(found, other)) << other;
  EXPECT_FALSE(listed(found, known)) << "a known child is not an orphan";
  for (const Orphan& each : found) {
    if (each.pid == orphan) {
      EXPECT_EQ(each.command, "sleep");
    }
  }

  const std::vector<Orphan> stopped = stop_orphans({known}, {}, 1s);
  EXPECT_TRUE(listed(stopped, orphan));
  EXPECT_TRUE(listed(stopped, other));
  EXPECT_EQ(kill(orphan, 0), -1) << "stopped and reaped";
  EXPECT_TRUE(adopted_orphans({known}).empty());
  EXPECT_EQ(kill(known, 0), 0) << "a known child is left alone";
  kill(known, SIGKILL);
  waitpid(known, nullptr, 0);
}

}  // namespace
}  // namespace cohort::detail
